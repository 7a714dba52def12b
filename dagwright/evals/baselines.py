"""An eval beside its baseline: per scorer, did it get worse (by more than its tolerance),
and per case, which scorers got worse or better, with both outputs.

``compare(current, baseline)`` is a pure function of two reports: ``dagwright eval
--baseline`` gates CI on its ``regressions``, and the API's and the dashboard's
side-by-side view show it whole. A baseline is an earlier eval (from the store) or a
report saved with ``--json`` (``reports.report_json``, read back by ``reports.load_report``).

A scorer regressed when its mean or its pass rate fell by more than its tolerance: the
scorer's own ``tolerance:`` in the suite (the current eval's suite: the change under test
sets its terms; the baseline's only if the current one kept none that parses), else the
``tolerance`` given. Both are read because a mean alone hides a case that went
from pass to fail while another's grade rose, and a pass rate alone hides a judge's
grades sliding under the pass mark. A grade of None (it could not be graded) counts as
failed and stays out of the mean; a scorer whose grades were all None on this side, when
the baseline had some, regressed (its mean fell to nothing). A scorer on one side only is
reported (``missing``) and never a regression: a suite may gain or drop a scorer.

Cases are compared by the same rule over their repeats (``EvalReport.case_stats``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from dagwright.evals.results import CaseResult, EvalReport, ScorerStats, scorer_names

if TYPE_CHECKING:
    from collections.abc import Callable

    from dagwright.evals.results import EvalRecord

# A fall of exactly the tolerance is not a regression; float sums must not make it one.
EPSILON = 1e-9

Side = Literal["baseline", "current"]


class ScorerComparison(BaseModel):
    """One scorer, the baseline's figures beside this eval's."""

    model_config = ConfigDict(frozen=True)

    scorer: str
    baseline_pass_rate: float | None
    pass_rate: float | None
    baseline_mean: float | None
    mean: float | None
    delta_mean: float | None
    """``mean - baseline_mean`` (None unless both have a mean)."""
    delta_pass_rate: float | None
    tolerance: float
    regressed: bool
    missing: Side | None = None
    """The side that has no graded run of this scorer, if one has none."""


class CaseComparison(BaseModel):
    """One case, the baseline's run beside this eval's (over repeats: their statistics)."""

    model_config = ConfigDict(frozen=True)

    case: str
    worse: list[str]
    """Scorers whose pass rate or mean fell by more than their tolerance in this case."""
    better: list[str]
    """Scorers whose pass rate or mean rose by more than their tolerance (none fell)."""
    baseline_output: str | None
    output: str | None
    """The output shown of each side: of the first repeat that failed a worse scorer (or
    passed it, on the baseline's side), else of the first repeat."""
    baseline_run_id: str | None = None
    run_id: str | None = None
    missing: Side | None = None
    """The side that did not run this case, if one did not."""


class Comparison(BaseModel):
    """An eval compared with its baseline (``compare``)."""

    model_config = ConfigDict(frozen=True)

    eval_id: str
    baseline_id: str
    suite: str
    baseline_suite: str
    same_suite: bool
    """Both ran the same suite content (equal ``suite_digest``)."""
    tolerance: float
    """The tolerance of scorers whose suite names none."""
    scorers: list[ScorerComparison]
    cases: list[CaseComparison]
    regressions: list[str]
    """The scorers that regressed, in order: non-empty fails a ``--baseline`` gate."""

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    def worse_cases(self) -> list[str]:
        """The cases in which some scorer got worse."""
        return [case.case for case in self.cases if case.worse]


def compare(current: EvalReport, baseline: EvalReport, *, tolerance: float = 0.0) -> Comparison:
    """``current`` beside ``baseline``: per scorer, per case, and the regressions."""
    tolerances = suite_tolerances(current.record)
    if tolerances is None:
        tolerances = suite_tolerances(baseline.record) or {}

    def tolerance_of(scorer: str) -> float:
        return tolerances.get(scorer, tolerance)

    scorers = [
        compare_scorer(name, now, then, tolerance_of(name))
        for name, now, then in paired_stats(current.stats(), baseline.stats())
    ]
    return Comparison(
        eval_id=current.record.id,
        baseline_id=baseline.record.id,
        suite=current.record.suite,
        baseline_suite=baseline.record.suite,
        same_suite=current.record.suite_digest == baseline.record.suite_digest,
        tolerance=tolerance,
        scorers=scorers,
        cases=[
            compare_case(case, current, baseline, tolerance_of)
            for case in case_names(current, baseline)
        ],
        regressions=[scorer.scorer for scorer in scorers if scorer.regressed],
    )


def suite_tolerances(record: EvalRecord) -> dict[str, float] | None:
    """Each scorer's own ``tolerance:`` in the suite the eval ran; None if no suite was
    kept or it does not parse (an eval of an older dagwright is still comparable)."""
    from dagwright.evals.suite import SuiteError, parse_suite

    if not record.suite_data:
        return None
    try:
        suite = parse_suite(record.suite_data)
    except SuiteError:
        return None
    found: dict[str, float] = {}
    for scorer in [*suite.scorers, *(s for case in suite.cases for s in case.scorers)]:
        if scorer.tolerance is not None:
            found.setdefault(scorer.label(), scorer.tolerance)
    return found


def paired_stats(
    current: list[ScorerStats], baseline: list[ScorerStats]
) -> list[tuple[str, ScorerStats | None, ScorerStats | None]]:
    """Each scorer's statistics on both sides (None where a side graded no run of it),
    this eval's scorers first, then those only the baseline had."""
    now = {stats.scorer: stats for stats in current if stats.runs}
    then = {stats.scorer: stats for stats in baseline if stats.runs}
    names = dict.fromkeys([*(s.scorer for s in current), *(s.scorer for s in baseline)])
    return [(name, now.get(name), then.get(name)) for name in names if name in now or name in then]


def compare_scorer(
    scorer: str, now: ScorerStats | None, then: ScorerStats | None, tolerance: float
) -> ScorerComparison:
    """One scorer's figures on both sides and whether it regressed."""
    pass_rate, mean = (now.pass_rate, now.mean) if now else (None, None)
    baseline_pass_rate, baseline_mean = (then.pass_rate, then.mean) if then else (None, None)
    missing: Side | None = "current" if now is None else "baseline" if then is None else None
    return ScorerComparison(
        scorer=scorer,
        baseline_pass_rate=baseline_pass_rate,
        pass_rate=pass_rate,
        baseline_mean=baseline_mean,
        mean=mean,
        delta_mean=difference(mean, baseline_mean),
        delta_pass_rate=difference(pass_rate, baseline_pass_rate),
        tolerance=tolerance,
        regressed=missing is None and fell(now, then, tolerance),
        missing=missing,
    )


def difference(value: float | None, baseline: float | None) -> float | None:
    return None if value is None or baseline is None else value - baseline


def fell(now: ScorerStats | None, then: ScorerStats | None, tolerance: float) -> bool:
    """Whether the pass rate or the mean fell from ``then`` to ``now`` by more than
    ``tolerance`` (a mean lost, every grade None, falls to 0)."""
    if now is None or then is None:
        return False
    if now.pass_rate < then.pass_rate - tolerance - EPSILON:
        return True
    if then.mean is None:
        return False
    return (now.mean if now.mean is not None else 0.0) < then.mean - tolerance - EPSILON


def rose(now: ScorerStats | None, then: ScorerStats | None, tolerance: float) -> bool:
    """Whether the pass rate or the mean rose by more than ``tolerance`` (a mean gained
    where there was none rose from 0)."""
    if now is None or then is None:
        return False
    if now.pass_rate > then.pass_rate + tolerance + EPSILON:
        return True
    if now.mean is None:
        return False
    return now.mean > (then.mean if then.mean is not None else 0.0) + tolerance + EPSILON


def case_names(current: EvalReport, baseline: EvalReport) -> list[str]:
    """This eval's cases in its order, then those only the baseline ran."""
    return list(dict.fromkeys([*current.record.cases, *baseline.record.cases]))


def compare_case(
    case: str,
    current: EvalReport,
    baseline: EvalReport,
    tolerance_of: Callable[[str], float],
) -> CaseComparison:
    """Which of ``case``'s scorers got worse or better, with an output of each side."""
    runs_now, runs_then = current.results_of(case), baseline.results_of(case)
    now = {stats.scorer: stats for stats in current.case_stats(case) if stats.runs}
    then = {stats.scorer: stats for stats in baseline.case_stats(case) if stats.runs}
    names = [name for name in scorer_names(current.record) if name in now and name in then]
    worse = [name for name in names if fell(now[name], then[name], tolerance_of(name))]
    better = [
        name
        for name in names
        if name not in worse and rose(now[name], then[name], tolerance_of(name))
    ]
    shown_now = shown_run(runs_now, worse, passed=False)
    shown_then = shown_run(runs_then, worse, passed=True)
    return CaseComparison(
        case=case,
        worse=worse,
        better=better,
        baseline_output=shown_then.output if shown_then else None,
        output=shown_now.output if shown_now else None,
        baseline_run_id=shown_then.run_id if shown_then else None,
        run_id=shown_now.run_id if shown_now else None,
        missing="current" if not runs_now else "baseline" if not runs_then else None,
    )


def shown_run(runs: list[CaseResult], scorers: list[str], *, passed: bool) -> CaseResult | None:
    """The run whose output best shows the change: the first whose grade by one of
    ``scorers`` passed as ``passed`` says, else the first run."""
    for run in runs:
        if any((score := run.score(name)) and score.passed == passed for name in scorers):
            return run
    return runs[0] if runs else None
