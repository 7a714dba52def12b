"""Evals with real workers: each deterministic and behaviour scorer against real runs, the
eval's record and results in Redis, --repeat statistics, --set changes, resumption."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis

from dagwright import Client
from dagwright.evals.results import CaseResult
from dagwright.evals.runner import EvalOptions, EvalRunner, eval_store, resume_runner
from dagwright.evals.suite import SuiteError, parse_suite

EXAMPLES = Path(__file__).parent.parent / "examples"
GREETING = EXAMPLES / "plans" / "greeting_inputs.yaml"

pytestmark = pytest.mark.usefixtures("worker")


def suite_of(**overrides: Any) -> Any:
    data: dict[str, Any] = {
        "name": "greeting",
        "plan": str(GREETING),
        "scorers": [{"contains": {"value": "hello", "node": "greet"}}],
        "cases": [
            {"name": "ada", "inputs": {"name": "Ada"}},
            {"name": "grace", "inputs": {"name": "Grace", "times": 3}, "tags": ["long"]},
        ],
    }
    data.update(overrides)
    return parse_suite(data)


def run(client: Client, suite: Any, **options: Any) -> Any:
    runner = EvalRunner(client, suite, EvalOptions(**options), suite_dir=Path("."))
    return runner.run()


def scores_by_case(report: Any, scorer: str) -> dict[str, bool]:
    return {r.case: r.score(scorer).passed for r in report.results}


def test_every_deterministic_scorer_grades_a_real_run(client: Client) -> None:
    scorers = [
        {"equals": {"value": "hello Ada", "node": "greet", "name": "exact"}},
        {"contains": {"value": "ADA", "ignore_case": True, "node": "greet", "name": "has-ada"}},
        {"not_contains": {"value": "Grace", "node": "greet", "name": "no-grace"}},
        {"regex": {"pattern": "^hello [A-Z][a-z]+$", "node": "greet", "name": "shape"}},
        {
            "json_schema": {
                "schema": {"type": "object", "required": ["to", "times"]},
                "node": "card",
            }
        },
        {"number": {"min": 1, "max": 2, "node": "card", "path": "times", "name": "times"}},
        {"function": {"function": "words_at_most", "params": {"limit": 2}, "node": "greet"}},
        {"node_type_ran": "function"},
        {"node_type_not_ran": "researcher"},
        {"max_duration_s": 120},
        {"max_cost_usd": 0.01},
        {"max_tokens": 0},
        {"no_dead_letters": True},
        {"succeeded": True},
    ]
    report = run(client, suite_of(scorers=scorers))

    by_case = {r.case: {s.scorer: s for s in r.scores} for r in report.results}
    ada, grace = by_case["ada"], by_case["grace"]
    assert all(score.passed for score in ada.values()), {k: v.reason for k, v in ada.items()}
    assert (
        not grace["exact"].passed and "expected hello Ada, got hello Grace" in grace["exact"].reason
    )
    assert not grace["has-ada"].passed and not grace["no-grace"].passed
    assert grace["shape"].passed and grace["json_schema"].passed
    assert not grace["times"].passed and grace["times"].grade == 3.0
    assert "3 is outside [1, 2]" in grace["times"].reason
    assert grace["function:words_at_most"].reason == "2 words of 2"
    assert ada["node_type_ran:function"].reason == "2 function node(s) ran"


def test_an_eval_is_kept_with_its_record_and_listed(
    client: Client, redis_client: redis.Redis
) -> None:
    report = run(client, suite_of())

    store = eval_store(client)
    kept = store.report(report.record.id)
    assert kept.record.status == "finished" and kept.record.finished_at is not None
    assert [r.case for r in kept.results] == ["ada", "grace"]
    assert kept.results[0].output == '{"card": {"times": 1, "to": "Ada"}, "greet": "hello Ada"}'
    assert all(
        r.run_id and client.status(r.run_id).status.value == "succeeded" for r in kept.results
    )
    assert [r.id for r in store.list(suite="greeting")] == [report.record.id]
    assert redis_client.ttl(client.runtime.keys.eval_results(report.record.id)) > 0


def test_repeat_gives_each_case_several_runs_and_their_spread(client: Client) -> None:
    report = run(client, suite_of(), repeat=3)

    assert sorted((r.case, r.repeat) for r in report.results) == [
        ("ada", 0),
        ("ada", 1),
        ("ada", 2),
        ("grace", 0),
        ("grace", 1),
        ("grace", 2),
    ]
    assert len({r.run_id for r in report.results}) == 6
    [stats] = report.stats()
    assert (stats.runs, stats.passed, stats.mean, stats.stdev) == (6, 6, 1.0, 0.0)


def test_set_changes_the_plan_for_this_eval_only(client: Client) -> None:
    suite = suite_of(scorers=[{"equals": {"value": "hi Ada", "node": "greet"}}])
    report = run(client, suite, sets=["greet.params.parts=[hi, Ada]"], cases=["ada"])

    assert report.results[0].scores[0].passed
    assert report.record.changes == {"set": ["greet.params.parts=[hi, Ada]"]}
    assert report.record.plan_data["nodes"][0]["params"] == {"parts": ["hi", "Ada"]}


def test_tags_pick_cases(client: Client) -> None:
    report = run(client, suite_of(), tags=["long"])
    assert [r.case for r in report.results] == ["grace"]


def test_a_case_whose_inputs_do_not_fit_is_refused_before_any_run(
    client: Client, redis_client: redis.Redis
) -> None:
    suite = suite_of(
        scorers=[{"contains": "x"}],
        cases=[{"name": "too-many", "inputs": {"name": "Ada", "times": 99}}],
    )
    with pytest.raises(SuiteError, match="case too-many: input 'times'"):
        run(client, suite)
    assert redis_client.zcard(client.runtime.keys.run_index) == 0


def test_a_resumed_eval_follows_its_runs_and_scores_each_once(client: Client) -> None:
    suite = suite_of()
    runner = EvalRunner(client, suite, EvalOptions(), suite_dir=Path("."))
    record = runner.new_record()
    store = eval_store(client)
    store.save(record)
    first = runner.run_case(record, runner.jobs(record)[0])  # a driver that died after one
    assert store.add_result(record.id, first)

    again, kept = resume_runner(client, record.id)
    report = again.run(kept)

    assert report.record.status == "finished"
    assert (report.results[0].case, report.results[0].run_id) == ("ada", first.run_id)
    assert len(report.results) == 2
    assert not store.add_result(record.id, CaseResult(case="ada", repeat=0, status="error"))


def test_evaluate_runs_a_suite_file_from_python(client: Client, tmp_path: Path) -> None:
    from dagwright.evals import EvalOptions, evaluate

    (tmp_path / "plan.yaml").write_text(GREETING.read_text())
    (tmp_path / "suite.yaml").write_text(
        "name: from-python\nplan: plan.yaml\nscorers: [{contains: {value: hello, node: greet}}]\n"
        "cases: [{name: ada, inputs: {name: Ada}}]\n"
    )
    seen: list[tuple[str, int, int]] = []
    report = evaluate(
        client,
        tmp_path / "suite.yaml",
        EvalOptions(repeat=2),
        on_progress=lambda result, kept, total: seen.append((result.case, kept, total)),
    )
    assert report.record.suite_file.endswith("suite.yaml")
    assert sorted(seen) == [("ada", 1, 2), ("ada", 2, 2)]
    assert all(r.scores[0].passed for r in report.results)


def test_an_eval_writes_its_grades_on_each_case_run(client: Client) -> None:
    report = run(client, suite_of(), cases=["grace"])

    [result] = report.results
    assert result.run_id is not None
    [score] = client.scores(result.run_id)
    assert (score.name, score.value, score.source) == (
        "contains-hello",
        1.0,
        f"eval:{report.record.id}",
    )
    assert score.comment == "passed: the output contains hello"
    assert score.by == "eval of greeting"


def test_a_run_that_dead_letters_fails_no_dead_letters(client: Client, tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(
        "goal: fail for good\nnodes:\n"
        "  - {id: bad, type: function, function: flaky, params: {permanent: true}}\n"
    )
    suite = parse_suite(
        {
            "name": "dead",
            "plan": str(tmp_path / "plan.yaml"),
            "scorers": [{"no_dead_letters": True}, {"succeeded": True}, {"contains": "x"}],
            "cases": [{"name": "bad"}],
        }
    )
    report = run(client, suite)

    [result] = report.results
    scores = {s.scorer: s for s in result.scores}
    assert result.status == "failed" and "node bad" in (result.error or "")
    assert not scores["no_dead_letters"].passed
    assert scores["no_dead_letters"].reason == "1 dead letter(s)"
    assert not scores["succeeded"].passed and not scores["contains:x"].passed
    assert scores["contains:x"].value is None  # a failed run has no answer to grade
