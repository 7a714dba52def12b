// The dead letters: what failed for good, why (its traceback folded under the error, read
// when unfolded: the list leaves tracebacks out), and a replay button for each.

import { getJson, postJson } from "./api.js";
import { actionButton, el, flash, reported } from "./dom.js";
import { ageElement } from "./times.js";

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

/** The stored traceback (redacted when it was stored), read once, on first unfolding. */
function tracebackFold(letter) {
  const fold = el("details", { class: "traceback" }, el("summary", {}, "traceback"));
  fold.addEventListener("toggle", async () => {
    if (!fold.open || fold.dataset.read) return;
    fold.dataset.read = "yes";
    const full = await reported(() => getJson(`/api/v1/dlq/${encodeURIComponent(letter.id)}`));
    const text = full && full.traceback ? full.traceback : "no traceback stored";
    fold.append(el("pre", { class: "traceback" }, text));
  });
  return fold;
}

function row(letter) {
  const run = letter.run_id
    ? el("a", { href: `/runs/${encodeURIComponent(letter.run_id)}` }, letter.run_id)
    : "-";
  return el(
    "tr",
    { "data-letter": letter.id },
    el("td", { class: "id" }, letter.id),
    el("td", {}, ageElement(letter.last_failure_at)),
    el("td", { class: "id" }, run),
    el("td", {}, letter.node_id || "-"),
    el("td", {}, letter.worker_type),
    el("td", {}, letter.classification),
    el("td", {}, el("span", { class: `badge dl-${letter.status}` }, letter.status)),
    el("td", { class: "num" }, letter.attempts),
    el("td", { class: "error" }, `${letter.error_class}: ${letter.message}`, tracebackFold(letter)),
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
