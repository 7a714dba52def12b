// The runs list: status, goal, age, tokens, cost; filtered by status and a search text.

import { getJson } from "./api.js";
import { cost, el, reported, tokens } from "./dom.js";
import { ageElement } from "./times.js";

const form = document.getElementById("filters");
const rows = document.getElementById("runs");
const more = document.getElementById("more");
let cursor = null;
let pagesShown = 1;
const REFRESH_MS = 5000;

function query() {
  const params = new URLSearchParams({ limit: "50" });
  const status = form.elements.status.value;
  const q = form.elements.q.value.trim();
  if (status) params.set("status", status);
  if (q) params.set("q", q);
  if (cursor) params.set("cursor", cursor);
  return params;
}

function row(run) {
  const counts = run.counts || {};
  const link = el("a", { href: `/runs/${encodeURIComponent(run.run_id)}` }, run.run_id);
  return el(
    "tr",
    { "data-run": run.run_id },
    el("td", { class: "id" }, link),
    el("td", {}, el("span", { class: `badge st-${run.status}` }, run.status)),
    el("td", { class: "goal" }, run.goal || "(explicit plan)"),
    el("td", {}, counts.total !== undefined ? `${counts.done ?? 0}/${counts.total}` : ""),
    el("td", {}, ageElement(run.created_at)),
    el("td", { class: "num" }, tokens(run.usage).toLocaleString()),
    el("td", { class: "num" }, cost(run.usage)),
  );
}

async function load(append) {
  if (!append) cursor = null;
  pagesShown = append ? pagesShown + 1 : 1;
  const page = await reported(() => getJson(`/api/v1/runs?${query()}`));
  if (!page) return;
  const built = page.runs.map(row);
  if (append) rows.append(...built);
  else rows.replaceChildren(...built);
  if (!page.runs.length && !append) {
    rows.replaceChildren(el("tr", {}, el("td", { colspan: 7, class: "muted" }, "no runs")));
  }
  cursor = page.next_cursor || null;
  more.hidden = !cursor;
  document.body.dataset.loaded = "yes";
}

let typing = null;
form.addEventListener("submit", (event) => {
  event.preventDefault();
  load(false);
});
form.elements.status.addEventListener("change", () => load(false));
form.elements.q.addEventListener("input", () => {
  clearTimeout(typing);
  typing = setTimeout(() => load(false), 250);
});
more.addEventListener("click", () => load(true));
// The first page follows new runs and status changes; pages read further on stay still.
setInterval(() => {
  if (!document.hidden && pagesShown === 1) load(false);
}, REFRESH_MS);
load(false);
