"""Client.trace over real runs: a real Valkey, a real Celery worker, the fake LLM API."""

from __future__ import annotations

import pytest

from dagwright import Client, PlanBuilder, RetryPolicy, RunStatus
from dagwright.errors import UnknownRunError
from dagwright.telemetry.run_trace import Trace
from dagwright.telemetry.spans import LLM_CALL, NODE_ATTEMPT, RETRY, RUN, TOOL_CALL, Span
from dagwright.testing import FakeAnthropicServer
from tests.support.llm_script import text, turn
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("worker")

WRITER = "You are the writer"


def named(trace: Trace, name: str) -> list[Span]:
    return [span for span in trace.spans if span.name == name]


def by_node(spans: list[Span]) -> dict[str, Span]:
    return {span.node or "": span for span in spans}


def test_a_run_with_an_agent_has_its_attempts_llm_calls_and_tool_calls(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(turn(WRITER, 1, text("The note."), tokens=(300, 40), delay_s=0.3))
    plan = PlanBuilder("g")
    first = plan.function("first", "count", params={"seconds": 0.2})
    tool = plan.function("tool", "record_tool_span", params={"tool": "lookup"})
    plan.agent("write", "writer", "Write a note.", depends_on=[first, tool])
    run = client.submit(plan.build())
    state = run.wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, state.nodes

    trace = client.trace(run.run_id)
    assert trace.finished and trace.status == RunStatus.SUCCEEDED and trace.nodes == 3
    assert trace.run_span.name == RUN and (trace.start, trace.end) == (
        state.created_at,
        state.finished_at,
    )
    attempts = by_node(named(trace, NODE_ATTEMPT))
    assert set(attempts) == {"first", "tool", "write"}
    for node_id, span in attempts.items():
        node = state.nodes[node_id]
        assert (span.start, span.end) == (node.started_at, node.finished_at)
        assert span.attributes["outcome"] == "succeeded"
        assert span.attributes["worker_type"] == node.type
    (call,) = named(trace, LLM_CALL)
    assert call.parent_id == attempts["write"].span_id
    assert call.attributes["model"] == "claude-sonnet-5-5"
    assert (call.attributes["input_tokens"], call.attributes["output_tokens"]) == (300, 40)
    assert call.attributes["cost_usd"] == pytest.approx(state.usage.cost_usd)
    assert 0.3 <= call.duration_s < 5 and call.start >= attempts["write"].start
    (tool_call,) = named(trace, TOOL_CALL)
    assert tool_call.parent_id == attempts["tool"].span_id
    assert tool_call.attributes == {"tool": "lookup"}


def test_a_retried_node_shows_two_attempts_and_the_retry(client: Client) -> None:
    plan = PlanBuilder()
    plan.function(
        "f", "flaky", params={"fail_times": 1}, retry=RetryPolicy(max_attempts=2, backoff_s=0.1)
    )
    run = client.submit(plan.build())
    assert run.result(timeout=30) == 2

    trace = client.trace(run.run_id)
    first, second = named(trace, NODE_ATTEMPT)
    assert (first.attempt, first.attributes["outcome"], first.status) == (1, "retrying", "error")
    assert (second.attempt, second.attributes["outcome"]) == (2, "succeeded")
    (retry,) = named(trace, RETRY)
    assert retry.parent_id == first.span_id and retry.start == first.end
    assert retry.attributes["error_class"] == "RetryableError"
    assert retry.attributes["delay_ms"] > 0


def test_a_failed_node_carries_its_error(client: Client) -> None:
    plan = PlanBuilder()
    plan.function("bad", "fail", params={"message": "no such customer"})
    run = client.submit(plan.build())
    assert run.wait(timeout=30).status == RunStatus.FAILED
    (attempt,) = named(client.trace(run.run_id), NODE_ATTEMPT)
    assert attempt.status == "error" and attempt.attributes["outcome"] == "failed"
    assert "no such customer" in str(attempt.attributes["error_message"])


def test_a_running_run_has_its_open_attempt_end_now(client: Client) -> None:
    plan = PlanBuilder()
    plan.function("nap", "sleep", params={"seconds": 20})
    run = client.submit(plan.build())
    wait_until(lambda: client.status(run.run_id).nodes["nap"].started_at, what="nap to start")
    before = client.trace(run.run_id)
    later = wait_until(
        lambda: (t := client.trace(run.run_id)).end > before.end and t, what="time to pass"
    )
    client.cancel(run.run_id)
    assert not later.finished and later.status == RunStatus.RUNNING
    (attempt,) = named(later, NODE_ATTEMPT)
    assert attempt.attributes["outcome"] == "running" and attempt.end == later.end
    (cancelled,) = named(client.trace(run.run_id), NODE_ATTEMPT)
    assert cancelled.attributes["outcome"] == "cancelled"


def test_the_planner_node_is_in_the_trace(client: Client, fake_llm: FakeAnthropicServer) -> None:
    plan = {
        "goal": "g",
        "output": "n",
        "nodes": [{"id": "n", "type": "function", "function": "noop"}],
    }
    fake_llm.add(
        {
            "match": {"system_contains": "You are the planner"},
            "reply": {"content": [{"type": "tool_use", "name": "submit_plan", "input": plan}]},
        }
    )
    run = client.submit(goal="Do one thing")
    assert run.wait(timeout=60).status == RunStatus.SUCCEEDED
    trace = client.trace(run.run_id)
    attempts = by_node(named(trace, NODE_ATTEMPT))
    assert attempts["_plan"].attributes["worker_type"] == "planner"
    assert attempts["_plan"].end <= attempts["n"].start
    assert [call.parent_id for call in named(trace, LLM_CALL)] == [attempts["_plan"].span_id]
    assert trace.run_span.attributes["planned_nodes"] == 1
    assert "Do one thing" not in trace.model_dump_json()


def test_an_unknown_run_has_no_trace(client: Client) -> None:
    with pytest.raises(UnknownRunError):
        client.trace("no-such-run")
