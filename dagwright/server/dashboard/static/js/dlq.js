// The dead letters: what failed for good, why, and a replay button for each.

import { getJson, postJson } from "./api.js";
import { actionButton, age, el, flash, reported } from "./dom.js";

const rows = document.getElementById("letters");

function replayButton(letter) {
  const replay = () =>
    reported(async () => {
      await postJson(`/api/v1/dlq/${encodeURIComponent(letter.id)}/replay`, { fresh: false });
      flash(`replayed ${letter.node_id} of run ${letter.run_id}`, "ok");
      await load();
    });
  return actionButton({ class: "replay", onclick: replay, disabled: letter.status !== "pending" }, "Replay");
}

function row(letter) {
  const run = letter.run_id
    ? el("a", { href: `/runs/${encodeURIComponent(letter.run_id)}` }, letter.run_id)
    : "-";
  return el(
    "tr",
    { "data-letter": letter.id },
    el("td", { class: "id" }, letter.id),
    el("td", {}, age(letter.last_failure_at)),
    el("td", { class: "id" }, run),
    el("td", {}, letter.node_id || "-"),
    el("td", {}, letter.worker_type),
    el("td", {}, letter.classification),
    el("td", {}, el("span", { class: `badge dl-${letter.status}` }, letter.status)),
    el("td", { class: "num" }, letter.attempts),
    el("td", { class: "error" }, `${letter.error_class}: ${letter.message}`),
    el("td", {}, replayButton(letter)),
  );
}

// `/dlq?run_id=R` shows one run's dead letters (the run page links here).
const runFilter = new URLSearchParams(location.search).get("run_id");

async function load() {
  const query = runFilter ? `?run_id=${encodeURIComponent(runFilter)}` : "";
  const answer = await reported(() => getJson(`/api/v1/dlq${query}`));
  if (!answer) return;
  const letters = Array.isArray(answer) ? answer : answer.letters || answer.entries || [];
  rows.replaceChildren(...letters.map(row));
  if (!letters.length) rows.append(el("tr", {}, el("td", { colspan: 10, class: "muted" }, "no dead letters")));
  document.body.dataset.loaded = "yes";
}

if (runFilter) {
  document.getElementById("filter-note").replaceChildren(
    `of run ${runFilter} · `,
    el("a", { href: "/dlq" }, "all dead letters"),
  );
}
load();
