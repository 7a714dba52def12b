// The schedules: when each fires next, its last run, and pause / resume / run now.

import { getJson, postJson } from "./api.js";
import { actionButton, el, flash, reported } from "./dom.js";
import { timeElement } from "./times.js";

const rows = document.getElementById("schedules");

function action(schedule, verb, label) {
  const act = () =>
    reported(async () => {
      const answer = await postJson(`/api/v1/schedules/${encodeURIComponent(schedule.name)}/${verb}`);
      const run = answer && answer.run_id ? ` (run ${answer.run_id})` : "";
      flash(`${schedule.name}: ${label.toLowerCase()} done${run}`, "ok");
      await load();
    });
  return actionButton({ class: verb, onclick: act }, label);
}

/** A cron schedule's times in its own zone (its cron fields' clock); an interval's in the
 * browser's. */
function zoneOf(schedule) {
  return schedule.cron && schedule.timezone ? schedule.timezone : undefined;
}

function row(schedule) {
  const when = schedule.cron ? `cron ${schedule.cron} ${schedule.timezone || ""}` : `every ${schedule.every_s}s`;
  const last = schedule.last_run_id
    ? el("a", { href: `/runs/${encodeURIComponent(schedule.last_run_id)}` }, `${schedule.last_run_id} (${schedule.last_run_status || "?"})`)
    : "-";
  return el(
    "tr",
    { "data-schedule": schedule.name },
    el("td", { class: "id" }, schedule.name),
    el("td", {}, when),
    el("td", { class: "goal" }, schedule.goal || (schedule.plan ? schedule.plan.goal || "(plan)" : "")),
    el("td", {}, schedule.paused ? "paused" : "active"),
    el("td", { class: "next-fire" }, timeElement(schedule.next_fire_at, zoneOf(schedule))),
    el("td", { class: "id" }, last),
    el(
      "td",
      {},
      schedule.paused ? action(schedule, "resume", "Resume") : action(schedule, "pause", "Pause"),
      action(schedule, "run", "Run now"),
    ),
  );
}

async function load() {
  const answer = await reported(() => getJson("/api/v1/schedules"));
  if (!answer) return;
  const schedules = Array.isArray(answer) ? answer : answer.schedules || [];
  rows.replaceChildren(...schedules.map(row));
  if (!schedules.length) rows.append(el("tr", {}, el("td", { colspan: 7, class: "muted" }, "no schedules")));
  document.body.dataset.loaded = "yes";
}

load();
