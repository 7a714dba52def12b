// The evals list: each eval of a suite, newest first, with its pass rate, state and cost
// (read again every few seconds while one of them runs).

import { getJson } from "./api.js";
import { el, reported } from "./dom.js";
import { ageElement } from "./times.js";
import { percent, usd } from "./eval-format.js";

const rows = document.getElementById("evals");
const note = document.getElementById("filter-note");
const suite = new URLSearchParams(location.search).get("suite");
const REFRESH_MS = 5000;

function row(summary) {
  const suiteLink = el("a", { href: `/evals?suite=${encodeURIComponent(summary.suite)}` }, summary.suite);
  return el(
    "tr",
    { "data-eval": summary.id },
    el("td", {}, suiteLink),
    el("td", { class: "id" }, el("a", { href: `/evals/${encodeURIComponent(summary.id)}` }, summary.id)),
    el("td", {}, ageElement(summary.started_at, " ago")),
    el("td", { class: "num" }, summary.cases.length),
    el("td", { class: "num" }, summary.repeat),
    el("td", { class: "num pass-rate" }, percent(summary.pass_rate)),
    el("td", {}, el("span", { class: `badge st-${summary.status}` }, summary.status)),
    el("td", { class: "num" }, usd(summary.cost_usd)),
  );
}

async function load() {
  const params = new URLSearchParams({ limit: "100" });
  if (suite) {
    params.set("suite", suite);
    note.replaceChildren(`Evals of suite ${suite} · `, el("a", { href: "/evals" }, "all evals"));
  }
  const evals = await reported(() => getJson(`/api/v1/evals?${params}`));
  if (!evals) return;
  rows.replaceChildren(...evals.map(row));
  if (!evals.length) {
    const hint = "no evals yet: `dagwright eval SUITE` runs one";
    rows.append(el("tr", {}, el("td", { colspan: 8, class: "muted" }, hint)));
  }
  document.body.dataset.loaded = "yes";
  if (evals.some((e) => e.status === "running")) setTimeout(load, REFRESH_MS);
}

load();
