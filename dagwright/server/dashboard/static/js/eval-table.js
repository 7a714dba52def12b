// One eval's table: a row per case, a column per scorer coloured by pass / fail (with
// repeats: mean ± spread and the passes counted), the case's cost and time, its outputs
// on demand; a row of each scorer over every case at the foot. Outputs are model-written
// text: they go into <pre> as text nodes.

import { el } from "./dom.js";
import { durationOf, grade, percent, scorerNames, seconds, usd } from "./eval-format.js";

/** `pass` (every run passed), `fail` (none did), `mixed`, or `none` (not graded). */
export function verdict(stats) {
  if (!stats || !stats.runs) return "none";
  if (stats.passed === stats.runs) return "pass";
  return stats.passed === 0 ? "fail" : "mixed";
}

function spread(stats) {
  return stats.stdev === null ? grade(stats.mean) : `${grade(stats.mean)} ± ${grade(stats.stdev)}`;
}

function scoreCell(scorer, stats, runs, repeat, worse) {
  const state = verdict(stats);
  const reasons = runs
    .map((run) => (run.scores.find((score) => score.scorer === scorer) || {}).reason)
    .filter(Boolean);
  let shown = "–";
  if (state !== "none" && repeat > 1) shown = [spread(stats), el("br"), `${stats.passed}/${stats.runs} passed`];
  else if (state !== "none") shown = `${state === "pass" ? "✓" : "✗"} ${grade(stats.mean)}${judged(scorer, runs)}`;
  const classes = `score ${state}${worse.has(scorer) ? " worse" : ""}`;
  return el("td", { class: classes, "data-scorer": scorer, title: reasons.join("\n") }, shown);
}

/** A judge's grade on its own scale, beside the [0, 1] value (one run: ` · grade 4`). */
function judged(scorer, runs) {
  const score = runs.length === 1 ? runs[0].scores.find((one) => one.scorer === scorer) : null;
  return score && score.kind === "judge" && score.grade !== null && score.grade !== undefined
    ? ` · grade ${score.grade}`
    : "";
}

function runOutput(run) {
  const link = run.run_id ? el("a", { href: `/runs/${encodeURIComponent(run.run_id)}` }, run.run_id) : "no run";
  return el(
    "div",
    { class: "case-run", "data-repeat": run.repeat },
    el("p", { class: "muted" }, `repeat ${run.repeat + 1} · ${run.status} · `, link),
    el("pre", { class: "output" }, run.output || "(no output)"),
    run.error ? el("pre", { class: "error" }, run.error) : null,
  );
}

/** Badges of the runs that did not succeed (failed, cancelled, error: none ran). */
function runStates(runs) {
  const counts = new Map();
  for (const run of runs) if (run.status !== "succeeded") counts.set(run.status, (counts.get(run.status) || 0) + 1);
  return [...counts].map(([status, count]) =>
    el("span", { class: `badge st-${status === "error" ? "failed" : status}` }, count > 1 ? `${count} ${status}` : status),
  );
}

function caseCost(runs) {
  if (runs.some((run) => run.cost_usd === null || run.cost_usd === undefined)) return null;
  return runs.reduce((sum, run) => sum + run.cost_usd, 0);
}

function meanDuration(runs) {
  const known = runs.map((run) => run.duration_s).filter((d) => d !== null && d !== undefined);
  return known.length ? known.reduce((a, b) => a + b, 0) / known.length : null;
}

function caseRow(report, name, scorers, worse) {
  const runs = report.results.filter((result) => result.case === name);
  const stats = new Map((report.case_stats[name] || []).map((s) => [s.scorer, s]));
  const outputs = runs.length
    ? el("details", { class: "outputs", "data-key": `output:${name}` }, el("summary", {}, runs.length > 1 ? `${runs.length} outputs` : "output"), runs.map(runOutput))
    : el("span", { class: "muted" }, "not run");
  return el(
    "tr",
    { "data-case": name, class: worse.size ? "worse" : null },
    el("th", { scope: "row", class: "case" }, name, runStates(runs)),
    scorers.map((scorer) => scoreCell(scorer, stats.get(scorer), runs, report.record.repeat, worse)),
    el("td", { class: "num" }, usd(caseCost(runs))),
    el("td", { class: "num" }, seconds(meanDuration(runs))),
    el("td", { class: "output-cell" }, outputs),
  );
}

function summaryRow(report, scorers) {
  const stats = new Map(report.stats.map((s) => [s.scorer, s]));
  const cell = (scorer) => {
    const found = stats.get(scorer);
    if (!found || !found.runs) return el("td", { class: "score none", "data-scorer": scorer }, "–");
    return el(
      "td",
      { class: `score ${verdict(found)}`, "data-scorer": scorer },
      `${percent(found.pass_rate)} passed`, el("br"), `mean ${spread(found)}`,
    );
  };
  return el(
    "tr",
    { class: "summary" },
    el("th", { scope: "row" }, "every case"),
    scorers.map(cell),
    el("td", { class: "num" }, usd(report.cost_usd)),
    el("td", { class: "num" }, seconds(durationOf(report.record))),
    el("td", {}, ""),
  );
}

/** The table's head, body and foot for `report`; `worseOf(case)`: the scorers that got
 * worse in that case against the baseline (a Set; empty without one). */
export function fillMatrix(table, report, worseOf) {
  const scorers = scorerNames(report.record);
  const head = el(
    "tr",
    {},
    el("th", {}, "case"),
    scorers.map((scorer) => el("th", { class: "scorer" }, scorer)),
    el("th", {}, "cost"),
    el("th", {}, report.record.repeat > 1 ? "mean time" : "time"),
    el("th", {}, "output"),
  );
  const body = report.record.cases.map((name) => caseRow(report, name, scorers, worseOf(name)));
  table.replaceChildren(
    el("thead", {}, head),
    el("tbody", {}, body),
    el("tfoot", {}, summaryRow(report, scorers)),
  );
}
