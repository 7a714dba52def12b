"""How an eval looks in a terminal: cases by scorers, each scorer's statistics, what failed.

Fits 80 columns whatever the scorers' names: the grid's columns are numbered, and the
scorers' table below names them. With ``--repeat`` a cell counts the passing repeats.
Beside a baseline (``print_comparison``): each scorer's figures on both sides, and each
case that got worse with both outputs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from dagwright.evals.results import CaseResult, EvalReport, Score, scorer_names

if TYPE_CHECKING:
    from dagwright.evals.baselines import CaseComparison, Comparison

PASS, FAIL, NONE = "✓", "✗", "·"
MAX_FAILURES_SHOWN = 20


def print_report(report: EvalReport, console: Console) -> None:
    """The whole report: headline, grid, scorers, failures, cost."""
    console.print(headline(report))
    console.print()
    console.print(case_grid(report))
    console.print()
    console.print(scorer_table(report))
    failures = failure_lines(report, console.width)
    if failures:
        console.print()
    for line in failures:
        console.print(line, soft_wrap=True)
    console.print(cost_line(report), soft_wrap=True)


def headline(report: EvalReport) -> Text:
    """``<id>  <suite>  <n> case(s)[ xN]  <state>[ in T s]``, then what was changed."""
    record = report.record
    took = ""
    if record.finished_at is not None:
        took = f" in {(record.finished_at - record.started_at).total_seconds():.1f} s"
    repeat = f" x{record.repeat}" if record.repeat > 1 else ""
    line = (
        f"{record.id}  {record.suite}  {len(record.cases)} case(s){repeat}  {record.status}{took}"
    )
    changes = [f"{name}: {value}" for name, value in record.changes.items()]
    return Text("\n".join([f"eval {line}", *changes]))


def case_grid(report: EvalReport) -> Table:
    names = scorer_names(report.record)
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("case", overflow="ellipsis", max_width=22, no_wrap=True)
    table.add_column("run", no_wrap=True)
    for number in range(1, len(names) + 1):
        table.add_column(str(number), justify="center", no_wrap=True)
    table.add_column("cost", justify="right", no_wrap=True)
    table.add_column("time", justify="right", no_wrap=True)
    for case in report.record.cases:
        runs = report.results_of(case)
        cells = [_cell([r.score(name) for r in runs], report.record.repeat) for name in names]
        table.add_row(escape(case), _run_cell(runs), *cells, _cost(runs), _time(runs))
    return table


def _cell(scores: list[Score | None], repeat: int) -> Text:
    given = [score for score in scores if score is not None]
    if not given:
        return Text(NONE, style="dim")
    passed = sum(score.passed for score in given)
    if repeat == 1 and len(given) == 1:
        mark = PASS if passed else FAIL
        grade = given[0].grade if given[0].kind == "judge" else None
        text = mark if grade is None else f"{mark}{grade:g}"
        return Text(text, style="green" if passed else "red")
    style = "green" if passed == len(given) else "red" if passed == 0 else "yellow"
    return Text(f"{passed}/{len(given)}", style=style)


def _run_cell(runs: list[CaseResult]) -> Text:
    if not runs:
        return Text("pending", style="dim")
    ok = sum(run.status == "succeeded" for run in runs)
    if len(runs) == 1:
        status = runs[0].status
        return Text("ok" if ok else status, style="green" if ok else "red")
    return Text(f"{ok}/{len(runs)}", style="green" if ok == len(runs) else "red")


def _cost(runs: list[CaseResult]) -> str:
    costs = [run.cost_usd for run in runs]
    if not costs:
        return ""
    if any(cost is None for cost in costs):
        return "unknown"
    return f"${sum(c or 0.0 for c in costs) / len(costs):.4f}"


def _time(runs: list[CaseResult]) -> str:
    times = [run.duration_s for run in runs if run.duration_s is not None]
    return f"{sum(times) / len(times):.1f} s" if times else ""


def scorer_table(report: EvalReport) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("scorer", overflow="ellipsis", max_width=30, no_wrap=True)
    table.add_column("passed", justify="right", no_wrap=True)
    table.add_column("rate", justify="right", no_wrap=True)
    table.add_column("mean", justify="right", no_wrap=True)
    table.add_column("±sd", justify="right", no_wrap=True)
    for number, stats in enumerate(report.stats(), start=1):
        rate = stats.pass_rate
        style = "green" if rate == 1 else "red" if rate == 0 else "yellow"
        table.add_row(
            str(number),
            escape(stats.scorer),
            f"{stats.passed}/{stats.runs}",
            Text(f"{rate:.0%}", style=style),
            "" if stats.mean is None else f"{stats.mean:.2f}",
            "" if stats.stdev is None else f"{stats.stdev:.2f}",
        )
    return table


def failure_lines(report: EvalReport, width: int = 80) -> list[Text]:
    """One line per failed case run or grade (the first MAX_FAILURES_SHOWN), with its
    reason, cut to ``width``. A run that failed is one line: its output scorers failed
    for that reason, and are not repeated."""
    lines = [
        line
        for result in report.results
        for line in _failures_of(result, repeated=report.record.repeat > 1)
    ]
    shown = [_cut(f"{FAIL} {line}", width) for line in lines[:MAX_FAILURES_SHOWN]]
    texts = [Text(line, style="red") for line in shown]
    if len(lines) > MAX_FAILURES_SHOWN:
        more = len(lines) - MAX_FAILURES_SHOWN
        texts.append(Text(f"... and {more} more (--json shows all)", style="dim"))
    return texts


def _failures_of(result: CaseResult, *, repeated: bool) -> list[str]:
    which = f"{result.case}#{result.repeat}" if repeated else result.case
    lines = []
    if result.error:
        lines.append(f"{which}: {result.error}")
    for score in result.scores:
        if not score.passed and score.reason != result.error:
            lines.append(f"{which} / {score.scorer}: {score.reason}")
    return lines


def _cut(line: str, width: int) -> str:
    line = " ".join(line.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def cost_line(report: EvalReport) -> Text:
    total = report.total_cost_usd()
    runs = "unknown" if total is None else f"${total:.4f}"
    asked, cached = report.judge_requests()
    judge = ""
    if asked or cached:
        judge = (
            f"; judge: {asked} verdict(s) asked, {cached} from the cache, "
            f"${report.judge_cost_usd():.4f}"
        )
    return Text(f"runs: {runs}{judge}", style="dim")


def print_eval_list(reports: list[EvalReport], console: Console) -> None:
    """Evals, newest first: id, suite, when, runs, share of passed grades, state."""
    if not reports:
        console.print("no evals yet: `dagwright eval SUITE` runs one")
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("eval", no_wrap=True)
    table.add_column("suite", overflow="ellipsis", max_width=18, no_wrap=True)
    table.add_column("started", no_wrap=True)
    table.add_column("runs", justify="right", no_wrap=True)
    table.add_column("passed", justify="right", no_wrap=True)
    table.add_column("state", no_wrap=True)
    for report in reports:
        record = report.record
        grades = [score.passed for result in report.results for score in result.scores]
        rate = f"{sum(grades) / len(grades):.0%}" if grades else ""
        table.add_row(
            record.id,
            escape(record.suite),
            record.started_at.astimezone().strftime("%m-%d %H:%M"),
            f"{len(report.results)}/{len(record.cases) * record.repeat}",
            rate,
            record.status,
        )
    console.print(table)


OUTPUT_CHARS_SHOWN = 300


def print_comparison(comparison: Comparison, console: Console) -> None:
    """The eval beside its baseline: the verdict, each scorer's figures on both sides,
    then each case that got worse with both outputs (cut; markup escaped: model-written)."""
    console.print()
    console.print(comparison_headline(comparison), soft_wrap=False)  # wrapped to the width
    console.print(comparison_table(comparison))
    for case in comparison.cases:
        if case.worse:
            console.print()
            for line in worse_case_lines(case):
                console.print(line, soft_wrap=False)


def comparison_headline(comparison: Comparison) -> Text:
    against = f"against {comparison.baseline_id}"
    if not comparison.same_suite:
        against += " (its suite differed)"
    if not comparison.regressed:
        return Text(f"{against}: no regression", style="green")
    worse = ", ".join(comparison.worse_cases()) or "no single case"
    scorers = ", ".join(comparison.regressions)
    return Text(f"{against}: regressed: {scorers} (worse in {worse})", style="red")


def comparison_table(comparison: Comparison) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("scorer", overflow="ellipsis", max_width=26, no_wrap=True)
    for heading in ("was", "now", "mean was", "now", "Δmean"):
        table.add_column(heading, justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    for scorer in comparison.scorers:
        verdict = Text("regressed", style="red") if scorer.regressed else Text("")
        if scorer.missing:
            verdict = Text(f"not in {scorer.missing}", style="dim")
        table.add_row(
            escape(scorer.scorer),
            _rate(scorer.baseline_pass_rate),
            _rate(scorer.pass_rate),
            _number(scorer.baseline_mean),
            _number(scorer.mean),
            "" if scorer.delta_mean is None else f"{scorer.delta_mean:+.2f}",
            verdict,
        )
    return table


def worse_case_lines(case: CaseComparison) -> list[Text]:
    return [
        Text(f"{FAIL} {case.case} got worse: {', '.join(case.worse)}", style="red"),
        Text(f"  was: {_shown_output(case.baseline_output)}"),
        Text(f"  now: {_shown_output(case.output)}"),
    ]


def _shown_output(output: str | None) -> str:
    if output is None:
        return "(not run)"
    text = " ".join(output.split())
    text = "".join(char if char.isprintable() else "\ufffd" for char in text)  # no ESC codes
    return text if len(text) <= OUTPUT_CHARS_SHOWN else text[: OUTPUT_CHARS_SHOWN - 1] + "…"


def _rate(rate: float | None) -> str:
    return "" if rate is None else f"{rate:.0%}"


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"
