"""A run that asks for the response cache (``submit(..., response_cache=True)``, a plan's
``response_cache``, ``dagwright run --response-cache``): its agents, planner included, are
answered from the cache when the very same request was answered before. Real Valkey and
workers, the real SDK against the strict fake Messages API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.models import Plan, RunState
from dagwright.settings import Settings
from dagwright.testing import FakeAnthropicServer
from tests.support.cli import cli_env, dagwright, json_out
from tests.support.llm_script import RESEARCHER, text, turn

pytestmark = pytest.mark.usefixtures("worker")

FACTS = "Redis streams are append-only logs."
WRITER = "You are the writer"


def one_researcher() -> Plan:
    plan = PlanBuilder("Facts on Redis streams")
    plan.agent("research", "researcher", "Collect facts on Redis streams.")
    return plan.build()


def run_to_the_end(client: Client, plan: Plan | None = None, **options: Any) -> RunState:
    state = client.submit(plan, **options).wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, state.nodes
    return state


def test_a_repeated_run_asking_for_the_cache_makes_no_model_call(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(turn(RESEARCHER, 1, text(FACTS), tokens=(300, 40)))  # answers once
    first = run_to_the_end(client, one_researcher(), response_cache=True)
    second = run_to_the_end(client, one_researcher(), response_cache=True)

    assert len(fake_llm.requests) == 1  # the second run was answered by the cache
    assert first.result == second.result == FACTS
    paid, cached = first.nodes["research"].usage, second.nodes["research"].usage
    assert (paid.input_tokens, paid.output_tokens) == (300, 40)
    assert (cached.input_tokens, cached.output_tokens, cached.cost_usd) == (0, 0, 0)
    assert second.usage.total_tokens == 0
    assert first.response_cache and second.response_cache


def test_runs_that_do_not_ask_both_call_the_model(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(turn(RESEARCHER, 1, text(FACTS), tokens=(300, 40), times=2))
    first = run_to_the_end(client, one_researcher())
    second = run_to_the_end(client, one_researcher())

    assert len(fake_llm.requests) == 2
    assert second.nodes["research"].usage.input_tokens == 300
    assert not first.response_cache and not second.response_cache


def test_only_the_run_that_asks_is_answered_from_the_cache(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(turn(RESEARCHER, 1, text(FACTS), times=2))
    run_to_the_end(client, one_researcher(), response_cache=True)  # fills the cache
    run_to_the_end(client, one_researcher())  # does not read it
    assert len(fake_llm.requests) == 2


def test_a_plan_asks_for_the_cache_and_the_submit_overrides_it(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(turn(RESEARCHER, 1, text(FACTS), times=2))
    plan = one_researcher().model_copy(update={"response_cache": True})
    run_to_the_end(client, plan)
    assert run_to_the_end(client, plan).response_cache
    assert len(fake_llm.requests) == 1

    refused = run_to_the_end(client, plan, response_cache=False)
    assert not refused.response_cache
    assert len(fake_llm.requests) == 2


def plan_entry(*nodes: dict[str, object], output: str) -> dict[str, object]:
    plan = {"goal": "g", "nodes": list(nodes), "output": output}
    return {
        "match": {"system_contains": "You are the planner"},
        "reply": {"content": [{"type": "tool_use", "name": "submit_plan", "input": plan}]},
    }


def test_the_planner_of_a_goal_run_honours_the_runs_flag(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        plan_entry({"id": "note", "type": "writer", "instruction": "Write a note."}, output="note"),
        turn(WRITER, 1, text("the note")),
    )
    goal = "Write a note about streams"
    first = run_to_the_end(client, goal=goal, worker_types=["writer"], response_cache=True)
    second = run_to_the_end(client, goal=goal, worker_types=["writer"], response_cache=True)

    assert len(fake_llm.requests) == 2  # the first run's planner and writer, nothing more
    assert first.result == second.result == "the note"
    assert set(second.nodes) == {"_plan", "note"}
    assert second.nodes["_plan"].usage.total_tokens == 0


@pytest.mark.subprocess
def test_dagwright_run_response_cache(
    settings: Settings,
    redis_client: object,
    fake_llm: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    fake_llm.add(turn(RESEARCHER, 1, text(FACTS)))
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(one_researcher().model_dump_json())
    env = cli_env(settings, tmp_path / "data")
    runs = [
        dagwright("run", str(plan_file), "--json", "--response-cache", env=env) for _ in range(2)
    ]
    assert all(result.returncode == 0 for result in runs), runs[-1].stderr
    outs = [json_out(result) for result in runs]
    assert [out["result"] for out in outs] == [FACTS, FACTS]
    assert all(out["response_cache"] for out in outs)
    assert len(fake_llm.requests) == 1
    status = dagwright("status", outs[1]["run_id"], env=env)
    assert "response cache: on" in status.stdout, status.stdout + status.stderr
