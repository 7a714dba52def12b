"""Evals written straight into the store, as the runner leaves them: for the tests of
the API's and the dashboard's eval views (which read evals, and run none)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from dagwright.evals.results import CaseResult, EvalRecord, Score, kept_output
from dagwright.evals.store import EvalStore, new_eval_id

HOSTILE_OUTPUT = "<img src=x onerror=\"document.body.dataset.pwned='yes'\"><script>x</script>"
SUITE: dict[str, Any] = {
    "name": "capitals",
    "goal": "Name the capital of the country in the inputs",
    "scorers": [{"contains": "Paris"}, {"judge": {"rubric": "One sentence", "name": "brief"}}],
    "cases": [{"name": "france", "inputs": {"country": "France"}}, {"name": "japan"}],
}


def graded(scorer: str, value: float | None, passed: bool, *, cached: bool | None = None) -> Score:
    kind = "judge" if scorer == "brief" else scorer.partition(":")[0]
    return Score(
        scorer=scorer,
        kind=kind,
        value=value,
        passed=passed,
        reason=f"{scorer}: {'ok' if passed else 'not found'}",
        grade=None if kind != "judge" or value is None else 1 + round(value * 4),
        cached=cached if kind == "judge" else None,
        tokens=0 if cached else 120 if kind == "judge" else 0,
        cost_usd=0.0 if cached else 0.001 if kind == "judge" else 0.0,
    )


def case_run(
    case: str,
    output: str,
    scores: list[Score],
    *,
    repeat: int = 0,
    cost_usd: float = 0.01,
    status: str = "succeeded",
) -> CaseResult:
    text, digest = kept_output(output)
    return CaseResult(
        case=case,
        repeat=repeat,
        run_id=f"r{case}{repeat}",
        status=status,
        output=text,
        output_sha256=digest,
        cost_usd=cost_usd,
        tokens=300,
        duration_s=1.5 + repeat,
        scores=scores,
    )


def saved_eval(
    store: EvalStore,
    results: list[CaseResult],
    *,
    suite: str = "capitals",
    ago_s: float = 60,
    repeat: int = 1,
    status: str = "finished",
    baseline: str | None = None,
) -> str:
    """An eval of ``SUITE`` (named ``suite``) started ``ago_s`` ago, with ``results``."""
    started = datetime.now(UTC) - timedelta(seconds=ago_s)
    cases = [case["name"] for case in SUITE["cases"]]
    record = EvalRecord(
        id=new_eval_id(),
        suite=suite,
        suite_digest="d" * 16,
        started_at=started,
        finished_at=started + timedelta(seconds=12) if status != "running" else None,
        status=status,  # type: ignore[arg-type]
        cases=cases,
        scorers={case: ["contains:Paris", "brief"] for case in cases},
        repeat=repeat,
        baseline=baseline,
        suite_data={**SUITE, "name": suite},
    )
    store.save(record)
    for result in results:
        store.add_result(record.id, result)
    return record.id


def passing_eval(store: EvalStore, **options: Any) -> str:
    """Both cases pass both scorers (the judge's verdicts asked once, then cached)."""
    return saved_eval(
        store,
        [
            case_run(
                "france",
                "Paris.",
                [graded("contains:Paris", 1.0, True), graded("brief", 1.0, True, cached=False)],
            ),
            case_run(
                "japan",
                "Paris? No: Tokyo.",
                [graded("contains:Paris", 1.0, True), graded("brief", 1.0, True, cached=True)],
            ),
        ],
        **options,
    )


def worse_eval(store: EvalStore, **options: Any) -> str:
    """france fails ``contains:Paris`` with a hostile output; japan stays as it was."""
    return saved_eval(
        store,
        [
            case_run(
                "france",
                HOSTILE_OUTPUT,
                [graded("contains:Paris", 0.0, False), graded("brief", 1.0, True, cached=False)],
            ),
            case_run(
                "japan",
                "Paris? No: Tokyo.",
                [graded("contains:Paris", 1.0, True), graded("brief", 1.0, True, cached=True)],
            ),
        ],
        **options,
    )
