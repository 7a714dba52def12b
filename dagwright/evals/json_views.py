"""The JSON shapes of evals: one function per shape, shared by ``dagwright eval --json``,
``dagwright evals show --json`` and the HTTP API (``/api/v1/evals``), so they never drift.

``eval_json(report)`` holds the report itself (``record``, ``results``, as
``EvalReport`` dumps them: a saved ``--json`` file reads back with
``EvalReport.model_validate`` and serves as a ``--baseline``) and beside it what is
derived from it: per scorer and per case-by-scorer statistics, cost, judge requests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dagwright.evals.baselines import Comparison
    from dagwright.evals.results import CaseResult, EvalReport, ScorerStats


def stats_json(stats: ScorerStats) -> dict[str, Any]:
    """A scorer's statistics, its pass rate included."""
    return {**stats.model_dump(mode="json"), "pass_rate": stats.pass_rate}


def eval_summary_json(report: EvalReport) -> dict[str, Any]:
    """An eval in a list: what ran, when, how it went (no outputs, no suite)."""
    record = report.record
    scores = [score for result in report.results for score in result.scores]
    return {
        "id": record.id,
        "suite": record.suite,
        "suite_digest": record.suite_digest,
        "status": record.status,
        "started_at": record.started_at.isoformat(),
        "finished_at": record.finished_at.isoformat() if record.finished_at else None,
        "duration_s": duration_s(report),
        "cases": len(record.cases),
        "repeat": record.repeat,
        "runs": len(report.results),
        "runs_passed": sum(passed_all(result) for result in report.results),
        "scores": len(scores),
        "scores_passed": sum(score.passed for score in scores),
        "pass_rate": sum(s.passed for s in scores) / len(scores) if scores else None,
        "cost_usd": report.total_cost_usd(),
        "judge_cost_usd": report.judge_cost_usd(),
        "changes": record.changes,
        "baseline": record.baseline,
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


def eval_json(report: EvalReport) -> dict[str, Any]:
    """An eval in full: its record and results, and the statistics a table shows."""
    asked, cached = report.judge_requests()
    return {
        **report.model_dump(mode="json"),
        "summary": eval_summary_json(report),
        "stats": [stats_json(stats) for stats in report.stats()],
        "case_stats": {
            case: [stats_json(stats) for stats in report.case_stats(case)]
            for case in report.record.cases
        },
        "judge_requests": {"asked": asked, "cached": cached},
    }


def comparison_json(comparison: Comparison) -> dict[str, Any]:
    """An eval beside its baseline (``baselines.compare``)."""
    return {
        **comparison.model_dump(mode="json"),
        "regressed": comparison.regressed,
        "worse_cases": comparison.worse_cases(),
    }
