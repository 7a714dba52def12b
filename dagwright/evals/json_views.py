"""The JSON shapes of evals the HTTP API adds to the CLI's: a list's row and a comparison.

One eval in full is ``reports.report_json`` (``dagwright eval --json``, ``evals show
--json`` and ``GET /api/v1/evals/{id}`` alike; a file of it reads back as a baseline).
A list's row (``evals list --json`` and ``GET /api/v1/evals`` alike) is the record
without the suite and the plan, with what its results add: how many runs passed, the
pass rate, the cost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dagwright.evals.baselines import Comparison
    from dagwright.evals.results import CaseResult, EvalReport

LISTED_RECORD_FIELDS_LEFT_OUT = frozenset({"suite_data", "plan_data"})


def eval_summary_json(report: EvalReport) -> dict[str, Any]:
    """An eval in a list: its record (no suite, no plan) and its figures (no outputs)."""
    record = report.record
    scores = [score for result in report.results for score in result.scores]
    return {
        **record.model_dump(mode="json", exclude=set(LISTED_RECORD_FIELDS_LEFT_OUT)),
        "duration_s": duration_s(report),
        "runs": len(report.results),
        "runs_passed": sum(passed_all(result) for result in report.results),
        "scores": len(scores),
        "scores_passed": sum(score.passed for score in scores),
        "pass_rate": sum(s.passed for s in scores) / len(scores) if scores else None,
        "cost_usd": report.total_cost_usd(),
        "judge_cost_usd": report.judge_cost_usd(),
    }


def passed_all(result: CaseResult) -> bool:
    """Whether a case run was graded and passed every scorer that graded it."""
    return bool(result.scores) and all(score.passed for score in result.scores)


def duration_s(report: EvalReport) -> float | None:
    """From the eval's start to its end (None while it runs)."""
    record = report.record
    if record.finished_at is None:
        return None
    return (record.finished_at - record.started_at).total_seconds()


def comparison_json(comparison: Comparison) -> dict[str, Any]:
    """An eval beside its baseline (``baselines.compare``; ``report_json``'s
    ``comparison`` is the same, without the two fields derived here)."""
    return {
        **comparison.model_dump(mode="json"),
        "regressed": comparison.regressed,
        "worse_cases": comparison.worse_cases(),
    }
