"""An eval compared with its baseline (``evals/baselines.compare``): which scorers
regressed beyond their tolerance, and which cases got worse, with both outputs.

Pure: reports are built here, as the store reads them back.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dagwright.evals.baselines import compare
from dagwright.evals.reports import load_report, report_json
from dagwright.evals.results import CaseResult, EvalRecord, EvalReport, Score

STARTED = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def score(scorer: str, value: float | None, passed: bool | None = None) -> Score:
    passed = (value is not None and value >= 1.0) if passed is None else passed
    return Score(scorer=scorer, kind=scorer.partition(":")[0], value=value, passed=passed)


def result(case: str, *scores: Score, repeat: int = 0, output: str = "") -> CaseResult:
    return CaseResult(
        case=case,
        repeat=repeat,
        run_id=f"run-{case}-{repeat}",
        status="succeeded",
        output=output or f"{case} answer {repeat}",
        scores=list(scores),
    )


def report(
    eval_id: str,
    results: list[CaseResult],
    *,
    scorers: dict[str, list[str]] | None = None,
    suite_data: dict[str, Any] | None = None,
    digest: str = "d1",
) -> EvalReport:
    cases = list(dict.fromkeys(r.case for r in results))
    if scorers is None:
        scorers = {
            c: list(dict.fromkeys(s.scorer for r in results if r.case == c for s in r.scores))
            for c in cases
        }
    record = EvalRecord(
        id=eval_id,
        suite="capitals",
        suite_digest=digest,
        started_at=STARTED,
        status="finished",
        cases=list(scorers),
        scorers=scorers,
        repeat=max((r.repeat for r in results), default=0) + 1,
        suite_data=suite_data or {},
    )
    return EvalReport(record=record, results=results)


def test_a_case_that_went_from_pass_to_fail_is_a_regression_named_with_both_outputs() -> None:
    baseline = report(
        "ev_base",
        [
            result("france", score("contains:Paris", 1.0), output="Paris"),
            result("japan", score("contains:Paris", 1.0), output="Tokyo"),
        ],
    )
    current = report(
        "ev_new",
        [
            result("france", score("contains:Paris", 0.0), output="Lyon, I think"),
            result("japan", score("contains:Paris", 1.0), output="Tokyo"),
        ],
    )
    found = compare(current, baseline)
    assert found.regressions == ["contains:Paris"] and found.regressed
    [scorer] = found.scorers
    assert (scorer.baseline_pass_rate, scorer.pass_rate) == (1.0, 0.5)
    assert scorer.delta_pass_rate == -0.5 and scorer.delta_mean == -0.5
    assert found.worse_cases() == ["france"]
    france, japan = found.cases
    assert (france.baseline_output, france.output) == ("Paris", "Lyon, I think")
    assert france.run_id == "run-france-0" and france.baseline_run_id == "run-france-0"
    assert japan.worse == [] and japan.better == []
    assert found.same_suite


def test_an_equal_eval_regresses_nothing_and_a_better_one_names_its_better_cases() -> None:
    baseline = report("ev_base", [result("france", score("judge:a1b2c3", 0.5, passed=False))])
    same = compare(report("ev_same", baseline.results), baseline)
    assert same.regressions == [] and same.cases[0].worse == [] and same.cases[0].better == []
    improved = report("ev_new", [result("france", score("judge:a1b2c3", 1.0))])
    found = compare(improved, baseline)
    assert found.regressions == [] and found.cases[0].better == ["judge:a1b2c3"]


def test_a_fall_within_the_tolerance_is_no_regression_and_beyond_it_is() -> None:
    baseline = report("ev_base", [result("c", score("judge:x", 0.8, passed=True))])
    current = report("ev_new", [result("c", score("judge:x", 0.7, passed=True))])
    assert compare(current, baseline).regressions == ["judge:x"]  # tolerance 0 by default
    assert compare(current, baseline, tolerance=0.1).regressions == []  # exactly 0.1: kept
    assert compare(current, baseline, tolerance=0.05).regressions == ["judge:x"]


def test_a_scorers_own_tolerance_in_the_suite_wins_over_the_argument() -> None:
    suite = {
        "name": "capitals",
        "goal": "Name the capital",
        "scorers": [
            {"judge": {"rubric": "Names the capital", "name": "capital", "tolerance": 0.3}},
            {"contains": "Paris"},
        ],
        "cases": [{"name": "c"}],
    }
    baseline = report("ev_base", [result("c", score("capital", 1.0), score("contains:Paris", 1.0))])
    current = report(
        "ev_new",
        [
            result(
                "c", score("capital", 0.75, passed=True), score("contains:Paris", 0.75, passed=True)
            )
        ],
        suite_data=suite,
    )
    found = compare(current, baseline, tolerance=0.1)
    assert found.regressions == ["contains:Paris"]  # 0.25 fell: over 0.1, under capital's 0.3
    tolerances = {s.scorer: s.tolerance for s in found.scorers}
    assert tolerances == {"capital": 0.3, "contains:Paris": 0.1}


def test_the_current_suites_tolerances_rule_and_the_baselines_only_without_one() -> None:
    def suite(tolerance: float | None) -> dict[str, Any]:
        options: dict[str, Any] = {"value": "Paris"}
        if tolerance is not None:
            options["tolerance"] = tolerance
        return {
            "name": "capitals",
            "goal": "g",
            "scorers": [{"contains": options}],
            "cases": [{"name": "c"}],
        }

    then = [result("c", score("contains:Paris", 1.0))]
    now = [result("c", score("contains:Paris", 0.75, passed=True))]
    loose_baseline = report("ev_base", then, suite_data=suite(0.5))
    strict_now = compare(report("ev_new", now, suite_data=suite(None)), loose_baseline)
    assert strict_now.regressions == ["contains:Paris"]  # its suite dropped the tolerance
    kept_none = compare(report("ev_new", now), loose_baseline)
    assert kept_none.regressions == [] and kept_none.scorers[0].tolerance == 0.5


def test_a_suite_that_no_longer_parses_falls_back_to_the_argument() -> None:
    baseline = report("ev_base", [result("c", score("x", 1.0))])
    current = report(
        "ev_new", [result("c", score("x", 0.5, passed=True))], suite_data={"name": "?"}
    )
    found = compare(current, baseline, tolerance=0.6)
    assert found.regressions == [] and found.scorers[0].tolerance == 0.6


def test_scorers_on_one_side_only_are_reported_and_never_regress() -> None:
    baseline = report("ev_base", [result("c", score("old", 1.0), score("kept", 1.0))])
    current = report("ev_new", [result("c", score("kept", 1.0), score("new", 0.0))])
    found = compare(current, baseline)
    by_name = {s.scorer: s for s in found.scorers}
    assert [s.scorer for s in found.scorers] == ["kept", "new", "old"]
    assert by_name["new"].missing == "baseline" and by_name["new"].baseline_pass_rate is None
    assert by_name["new"].pass_rate == 0.0 and by_name["new"].delta_pass_rate is None
    assert by_name["old"].missing == "current" and by_name["old"].mean is None
    assert by_name["kept"].missing is None
    assert found.regressions == [] and found.cases[0].worse == []


def test_cases_on_one_side_only_are_listed_with_the_output_they_have() -> None:
    baseline = report("ev_base", [result("gone", score("s", 1.0), output="old answer")])
    current = report("ev_new", [result("added", score("s", 0.0), output="new answer")])
    found = compare(current, baseline)
    added, gone = found.cases
    assert (added.case, added.missing, added.output, added.baseline_output) == (
        "added",
        "baseline",
        "new answer",
        None,
    )
    assert (gone.case, gone.missing, gone.output, gone.baseline_output) == (
        "gone",
        "current",
        None,
        "old answer",
    )
    assert found.regressions == ["s"]  # pass rate 1.0 -> 0.0 over the cases each ran


def test_repeats_are_compared_by_their_mean_and_the_failed_repeat_is_shown() -> None:
    baseline = report(
        "ev_base",
        [result("c", score("s", 1.0), repeat=i, output=f"good {i}") for i in range(3)],
    )
    current = report(
        "ev_new",
        [
            result("c", score("s", 1.0), repeat=0, output="good 0"),
            result("c", score("s", 0.0), repeat=1, output="bad 1"),
            result("c", score("s", 1.0), repeat=2, output="good 2"),
        ],
    )
    found = compare(current, baseline, tolerance=0.2)
    [scorer] = found.scorers
    assert scorer.mean == pytest.approx(2 / 3) and scorer.baseline_mean == 1.0
    assert scorer.pass_rate == pytest.approx(2 / 3) and scorer.regressed  # fell 1/3 > 0.2
    [case] = found.cases
    assert case.worse == ["s"]
    assert (case.output, case.baseline_output) == ("bad 1", "good 0")
    assert case.run_id == "run-c-1"
    assert compare(current, baseline, tolerance=0.34).regressions == []


def test_ungraded_runs_count_as_failed_and_a_mean_lost_is_a_fall() -> None:
    baseline = report("ev_base", [result("c", score("judge:x", 0.5, passed=False))])
    ungraded = report("ev_new", [result("c", score("judge:x", None, passed=False))])
    found = compare(ungraded, baseline)
    [scorer] = found.scorers
    assert scorer.mean is None and scorer.delta_mean is None and scorer.pass_rate == 0.0
    assert scorer.regressed and found.cases[0].worse == ["judge:x"]  # 0.5 -> nothing
    back = compare(baseline, ungraded)
    assert back.regressions == [] and back.cases[0].better == ["judge:x"]
    both = compare(ungraded, report("ev_old", ungraded.results))
    assert both.regressions == [] and both.scorers[0].delta_mean is None


def test_a_scorer_no_run_was_graded_by_is_missing_on_that_side() -> None:
    baseline = report("ev_base", [result("c", score("s", 1.0))])
    interrupted = report("ev_new", [], scorers={"c": ["s"]})
    found = compare(interrupted, baseline)
    assert found.scorers[0].missing == "current" and found.regressions == []
    assert found.cases[0].missing == "current" and found.cases[0].output is None


def test_a_report_saved_as_json_reads_back_as_a_baseline(tmp_path: Path) -> None:
    baseline = report("ev_base", [result("c", score("s", 1.0), output="<b>kept</b>")])
    file = tmp_path / "baseline.json"
    file.write_text(json.dumps(report_json(baseline, compare(baseline, baseline))))
    saved = load_report(file, max_bytes=100_000)
    assert saved == baseline
    current = report("ev_new", [result("c", score("s", 0.0))])
    assert compare(current, saved).regressions == ["s"]


def test_evals_of_different_suite_content_say_so() -> None:
    baseline = report("ev_base", [result("c", score("s", 1.0))], digest="aaa")
    current = report("ev_new", [result("c", score("s", 1.0))], digest="bbb")
    assert not compare(current, baseline).same_suite
