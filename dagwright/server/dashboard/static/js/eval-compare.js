// An eval beside its baseline: per scorer both pass rates and means, the regressions
// marked; per case the scorers that got worse or better and both outputs side by side
// (open where something got worse). Outputs are model-written: text nodes only.

import { el } from "./dom.js";
import { delta, grade, percent } from "./eval-format.js";

function scorerRow(scorer) {
  const missing = scorer.missing ? ` (not in the ${scorer.missing === "current" ? "eval" : "baseline"})` : "";
  return el(
    "tr",
    { "data-scorer": scorer.scorer, class: scorer.regressed ? "regressed" : null },
    el("th", { scope: "row" }, scorer.scorer + missing),
    el("td", { class: "num" }, percent(scorer.baseline_pass_rate)),
    el("td", { class: "num" }, percent(scorer.pass_rate)),
    el("td", { class: "num" }, delta(scorer.delta_pass_rate)),
    el("td", { class: "num" }, grade(scorer.baseline_mean)),
    el("td", { class: "num" }, grade(scorer.mean)),
    el("td", { class: "num" }, delta(scorer.delta_mean)),
    el("td", { class: "num" }, grade(scorer.tolerance)),
    el("td", {}, scorer.regressed ? "regressed" : "ok"),
  );
}

function scorerTable(comparison) {
  const heads = ["scorer", "baseline pass", "pass", "Δ pass", "baseline mean", "mean", "Δ mean", "tolerance", ""];
  return el(
    "table",
    { class: "list compare-scorers", id: "compare-scorers" },
    el("thead", {}, el("tr", {}, heads.map((h) => el("th", {}, h)))),
    el("tbody", {}, comparison.scorers.map(scorerRow)),
  );
}

function runLink(runId) {
  return runId ? el("a", { href: `/runs/${encodeURIComponent(runId)}` }, runId) : "";
}

function side(title, output, runId) {
  return el(
    "div",
    { class: "side" },
    el("h3", {}, title, " ", runLink(runId)),
    el("pre", { class: "output" }, output === null ? "(this case did not run)" : output || "(no output)"),
  );
}

function marks(names, kind) {
  return names.map((name) => el("span", { class: `mark ${kind}`, "data-scorer": name }, name));
}

function caseBlock(comparison, item) {
  const changed = [...marks(item.worse, "worse"), ...marks(item.better, "better")];
  const title = el(
    "summary",
    {},
    el("b", {}, item.case),
    " ",
    changed.length ? changed : el("span", { class: "muted" }, item.missing ? `only in the ${item.missing === "current" ? "baseline" : "eval"}` : "unchanged"),
  );
  return el(
    "details",
    {
      class: `case-compare${item.worse.length ? " worse" : ""}`,
      "data-case": item.case,
      "data-key": `compare:${item.case}`,
      open: item.worse.length > 0,
    },
    title,
    el(
      "div",
      { class: "sides" },
      side(`baseline ${comparison.baseline_id}`, item.baseline_output, item.baseline_run_id),
      side(`this eval ${comparison.eval_id}`, item.output, item.run_id),
    ),
  );
}

/** The comparison's section: a verdict line, the scorers, then the cases. */
export function comparisonView(comparison) {
  const verdict = comparison.regressed
    ? `Regressed against ${comparison.baseline_id}: ${comparison.regressions.join(", ")} (worse in ${comparison.worse_cases.join(", ") || "no single case"})`
    : `No regression against ${comparison.baseline_id}`;
  const suiteNote = comparison.same_suite ? "" : " · the suite changed between the two evals";
  return [
    el("h2", {}, "Beside the baseline"),
    el("p", { class: comparison.regressed ? "verdict regressed" : "verdict ok", id: "verdict" }, verdict + suiteNote),
    scorerTable(comparison),
    el("h3", {}, "Cases"),
    comparison.cases.map((item) => caseBlock(comparison, item)),
  ];
}
