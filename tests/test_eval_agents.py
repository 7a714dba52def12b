"""Evals of agents with real workers and the fake Messages API: tools called or not, read
from the run's record; the LLM judge through the runner, its verdicts cached so that a
re-run of an unchanged eval asks the judge nothing (the fake's requests counted)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dagwright import Client
from dagwright.evals.runner import EvalOptions, EvalRunner
from dagwright.evals.suite import parse_suite
from dagwright.testing import FakeAnthropicServer
from tests.support.llm_script import RESEARCHER, call, text, turn

JUDGE = "You are the judge"
PLAN = {
    "goal": "research a topic",
    "inputs": {"type": "object", "properties": {"topic": {"type": "string"}}},
    "output": "research",
    "nodes": [
        {
            "id": "brief",
            "type": "function",
            "function": "concat",
            "params": {"parts": ["Topic: {{ inputs.topic }}"]},
        },
        {
            "id": "research",
            "type": "researcher",
            "instruction": "Read the brief and say what the topic is, in one sentence.",
            "depends_on": ["brief"],
        },
    ],
}
SCORERS = [
    {"tool_called": "read_input"},
    {"tool_not_called": "http_get"},
    {"tool_not_called": {"tool": "read_input", "name": "never-reads"}},
    {"node_type_ran": "researcher"},
    {"max_tokens": 10_000},
    {"judge": {"rubric": "Says what the topic is, in one sentence.", "pass_score": 4}},
]

pytestmark = pytest.mark.usefixtures("worker")


def script(fake: FakeAnthropicServer) -> None:
    fake.add(
        {**turn(RESEARCHER, 1, call("read_input", node="brief")), "times": -1},
        {**turn(RESEARCHER, 3, text("Redis streams are an append-only log.")), "times": -1},
        {
            "match": {"system_contains": JUDGE},
            "times": -1,
            "reply": {
                "content": [
                    {
                        "type": "tool_use",
                        "name": "record_verdict",
                        "input": {"grade": 4, "reason": "One sentence, on topic."},
                    }
                ],
                "usage": {"input_tokens": 300, "output_tokens": 30},
            },
        },
    )


def judge_requests(fake: FakeAnthropicServer) -> int:
    return sum(str(r.body.get("system", "")).startswith(JUDGE) for r in fake.requests)


def run_eval(client: Client, tmp_path: Path, **options: Any) -> Any:
    import yaml

    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(PLAN))
    suite = parse_suite(
        {
            "name": "agents",
            "plan": "plan.yaml",
            "scorers": SCORERS,
            "cases": [
                {"name": "streams", "inputs": {"topic": "Redis streams"}},
                {"name": "lists", "inputs": {"topic": "Redis lists"}},
            ],
        }
    )
    runner = EvalRunner(client, suite, EvalOptions(**options), suite_dir=tmp_path)
    return runner.run()


def test_tools_and_the_judge_grade_agent_runs(
    client: Client, fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    script(fake_llm)
    report = run_eval(client, tmp_path)

    for result in report.results:
        scores = {score.scorer: score for score in result.scores}
        assert scores["tool_called:read_input"].passed
        assert scores["tool_called:read_input"].reason == "read_input ran 1 time(s)"
        assert scores["tool_not_called:http_get"].passed
        assert not scores["never-reads"].passed
        assert scores["never-reads"].reason == "read_input asked for 1 time(s)"
        assert scores["node_type_ran:researcher"].passed and scores["max_tokens:10000"].passed
        [judged] = [score for score in result.scores if score.kind == "judge"]
        assert (judged.grade, judged.value, judged.passed) == (4, 0.75, True)
        assert judged.cached is False and judged.tokens > 0
        assert result.output == "Redis streams are an append-only log."
    assert report.judge_requests() == (2, 0)


def test_a_rerun_asks_the_judge_nothing(
    client: Client, fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    script(fake_llm)
    run_eval(client, tmp_path)
    first = judge_requests(fake_llm)
    agents_first = len(fake_llm.requests) - first

    again = run_eval(client, tmp_path)

    assert first == 2  # one verdict per case: the cases' inputs differ
    assert judge_requests(fake_llm) == first  # 0 judge requests on the re-run
    assert len(fake_llm.requests) - first == 2 * agents_first  # the agents did run again
    assert again.judge_requests() == (0, 2)
    judged = [s for r in again.results for s in r.scores if s.kind == "judge"]
    assert all(s.cached and s.tokens == 0 and s.grade == 4 for s in judged)


def test_a_changed_output_is_judged_again(
    client: Client, fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    script(fake_llm)
    run_eval(client, tmp_path, cases=None)
    fake_llm.reset()
    fake_llm.add({**turn(RESEARCHER, 3, text("Redis streams: a log.")), "times": -1})
    script(fake_llm)

    report = run_eval(client, tmp_path)

    assert report.judge_requests() == (2, 0)
    assert judge_requests(fake_llm) == 2
