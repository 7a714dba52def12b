"""The pure trace builder, over hand-made run states, events and recorded spans."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dagwright.models import ErrorInfo, Event, NodeState, NodeStatus, RunCounts, RunState, RunStatus
from dagwright.telemetry.run_trace import ENDING_EVENTS, Trace, build_trace
from dagwright.telemetry.spans import (
    LLM_CALL,
    NODE_ATTEMPT,
    RETRY,
    RUN,
    TOOL_CALL,
    Span,
    attempt_span_id,
)

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
RUN_ID = "r1"


def at(ms: int) -> datetime:
    return T0 + timedelta(milliseconds=ms)


def state(
    status: RunStatus = RunStatus.SUCCEEDED,
    finished_ms: int | None = 10_000,
    nodes: dict[str, NodeState] | None = None,
    goal: str = "a secret plan",
) -> RunState:
    nodes = nodes or {"a": NodeState(status=NodeStatus.SUCCEEDED, type="function")}
    return RunState(
        run_id=RUN_ID,
        status=status,
        goal=goal,
        created_at=T0,
        finished_at=at(finished_ms) if finished_ms is not None else None,
        counts=RunCounts(total=len(nodes)),
        output_nodes=list(nodes),
        nodes=nodes,
    )


class Events:
    """A run's event stream, written in order."""

    def __init__(self) -> None:
        self.items: list[Event] = []

    def add(self, ms: int, kind: str, node: str | None = None, **data: Any) -> Events:
        entry_id = f"{ms}-{len(self.items)}"
        fields = {name: str(value) for name, value in data.items()}
        self.items.append(
            Event(id=entry_id, run_id=RUN_ID, kind=kind, at=at(ms), node=node, data=fields)
        )
        return self

    def llm_call(self, ms: int, node: str, latency_ms: int, **data: Any) -> Events:
        defaults = {"model": "m", "input_tokens": 1, "output_tokens": 1, "cost_usd": 0, "cached": 0}
        return self.add(ms, "llm.call", node, latency_ms=latency_ms, **{**defaults, **data})

    def attempt(self, node: str, attempt: int, start: int, end: int, ending: str) -> Events:
        self.add(start, "node.running", node, attempt=attempt, holder="host:1")
        return self.add(end, ending, node)


def spans_named(trace: Trace, name: str) -> list[Span]:
    return [span for span in trace.spans if span.name == name]


def test_the_run_span_comes_first_and_leaves_the_goal_out() -> None:
    events = Events().attempt("a", 1, 100, 900, "node.succeeded")
    trace = build_trace(state(), events.items, [], now=at(99_999))
    run = trace.run_span
    assert run.name == RUN and run.span_id == RUN_ID and run.parent_id is None
    assert (run.start, run.end) == (T0, at(10_000))
    assert trace.finished and trace.status == RunStatus.SUCCEEDED and trace.nodes == 1
    assert run.attributes["status"] == "succeeded"
    assert "a secret plan" not in trace.model_dump_json()


@pytest.mark.parametrize(("kind", "outcome"), sorted(ENDING_EVENTS.items()))
def test_every_outcome_event_ends_the_running_attempt(kind: str, outcome: str) -> None:
    events = Events().attempt("a", 1, 100, 700, kind)
    (attempt,) = spans_named(build_trace(state(), events.items, [], now=at(99_999)), NODE_ATTEMPT)
    assert attempt.span_id == attempt_span_id("a", 1) and attempt.parent_id == RUN_ID
    assert (attempt.start, attempt.end) == (at(100), at(700))
    assert attempt.attributes["outcome"] == outcome
    assert attempt.attributes["worker_type"] == "function"
    failed = outcome in {"failed", "retrying", "breaker_open", "lease_expired", "taken_over"}
    assert attempt.status == ("error" if failed else "ok")


def test_an_attempt_still_running_ends_now_and_says_so() -> None:
    events = Events().add(100, "node.running", "a", attempt=1)
    running = state(RunStatus.RUNNING, finished_ms=None)
    trace = build_trace(running, events.items, [], now=at(5_000))
    (attempt,) = spans_named(trace, NODE_ATTEMPT)
    assert attempt.end == at(5_000) and attempt.attributes["outcome"] == "running"
    assert trace.end == at(5_000) and not trace.finished


def test_a_retried_node_has_two_attempts_and_a_retry_span() -> None:
    events = (
        Events()
        .add(100, "node.running", "a", attempt=1)
        .add(300, "node.retrying", "a", delay_ms=1000, error_class="RetryableError")
        .add(1300, "node.queued", "a", fence=2)
        .attempt("a", 2, 1350, 1600, "node.succeeded")
    )
    trace = build_trace(state(), events.items, [], now=at(99_999))
    first, second = spans_named(trace, NODE_ATTEMPT)
    assert (first.attempt, first.attributes["outcome"], first.end) == (1, "retrying", at(300))
    assert (second.attempt, second.attributes["outcome"], second.start) == (
        2,
        "succeeded",
        at(1350),
    )
    (retry,) = spans_named(trace, RETRY)
    assert retry.parent_id == first.span_id and retry.start == retry.end == at(300)
    assert retry.attributes == {"delay_ms": 1000, "error_class": "RetryableError"}


def test_a_failed_attempt_carries_the_node_error() -> None:
    error = ErrorInfo(error_class="PermanentError", message="x" * 500, retryable=False)
    nodes = {"a": NodeState(status=NodeStatus.FAILED, type="python", error=error)}
    events = Events().attempt("a", 1, 100, 200, "node.failed")
    (attempt,) = spans_named(
        build_trace(state(RunStatus.FAILED, nodes=nodes), events.items, [], now=at(0)),
        NODE_ATTEMPT,
    )
    assert attempt.attributes["error_class"] == "PermanentError"
    assert attempt.attributes["error_message"] == "x" * 200


def test_llm_calls_start_latency_before_their_event_under_the_attempt_running() -> None:
    events = (
        Events()
        .add(100, "node.running", "a", attempt=1)
        .add(150, "node.running", "b", attempt=1)
        .llm_call(900, "a", 600, model="m1", input_tokens=100, output_tokens=20, cost_usd=0.0012)
        .llm_call(950, "b", 0, cached=1)
        .add(1000, "node.succeeded", "a")
        .add(1000, "node.succeeded", "b")
    )
    nodes = {n: NodeState(status=NodeStatus.SUCCEEDED, type="writer") for n in "ab"}
    trace = build_trace(state(nodes=nodes), events.items, [], now=at(0))
    call_a, call_b = spans_named(trace, LLM_CALL)
    assert call_a.parent_id == "a#1" and call_b.parent_id == "b#1"
    assert (call_a.start, call_a.end) == (at(300), at(900))
    assert call_a.attributes == {
        "model": "m1",
        "input_tokens": 100,
        "output_tokens": 20,
        "cost_usd": 0.0012,
        "latency_ms": 600,
        "cached": False,
    }
    assert call_b.attributes["cached"] is True and call_b.start == call_b.end


def recorded(span_id: str, parent: str | None, start: int, name: str = TOOL_CALL) -> Span:
    return Span(
        span_id=span_id,
        parent_id=parent,
        name=name,
        start=at(start),
        end=at(start + 10),
        attributes={"tool": "workspace_write"},
    )


def test_recorded_spans_attach_to_their_parent_or_else_to_the_run() -> None:
    events = Events().attempt("a", 1, 100, 900, "node.succeeded")
    spans = [
        recorded("t1", "a#1", 200),
        recorded("t2", "gone#7", 300),  # its attempt is not in the events
        recorded("t3", None, 400),
        recorded("t4", "t1", 205),  # a child of another recorded span
    ]
    trace = build_trace(state(), events.items, spans, now=at(0))
    parents = {span.span_id: span.parent_id for span in trace.spans}
    assert parents == {
        RUN_ID: None,
        "a#1": RUN_ID,
        "t1": "a#1",
        "t2": RUN_ID,
        "t3": RUN_ID,
        "t4": "t1",
    }
    assert trace.children()["a#1"] == [span for span in trace.spans if span.span_id == "t1"]


def test_an_attempt_claimed_twice_gets_two_ids_and_spans_go_to_the_claim_running() -> None:
    # Parked for a concurrency slot: its attempt number is given back and claimed again.
    events = (
        Events()
        .attempt("a", 1, 100, 110, "node.parked")
        .attempt("a", 1, 500, 900, "node.succeeded")
    )
    spans = [recorded("early", "a#1", 105), recorded("late", "a#1", 600)]
    trace = build_trace(state(), events.items, spans, now=at(0))
    first, second = spans_named(trace, NODE_ATTEMPT)
    assert (first.span_id, second.span_id) == ("a#1", "a#1~2")
    assert first.attributes["outcome"] == "parked"
    parents = {span.span_id: span.parent_id for span in spans_named(trace, TOOL_CALL)}
    assert parents == {"early": "a#1", "late": "a#1~2"}


def test_each_claim_of_an_attempt_has_its_own_row_label_in_the_timeline() -> None:
    from dagwright.telemetry.timeline import layout

    events = (
        Events()
        .attempt("a", 1, 100, 110, "node.parked")
        .attempt("a", 1, 500, 900, "node.succeeded")
    )
    trace = build_trace(state(), events.items, [], now=at(1000))
    timeline = layout(trace, left=0, width=500, min_tick_gap=50)
    assert [bar.label for bar in timeline.bars] == ["a #1", "a #1~2"]


def test_long_row_labels_are_cut_in_the_middle_and_keep_the_attempt() -> None:
    from dagwright.telemetry.timeline import MAX_LABEL_CHARS, shorten

    left = shorten("research_the_pricing_of_every_competitor_left #2~3")
    right = shorten("research_the_pricing_of_every_competitor_right #2~3")
    assert left != right and len(left) == len(right) == MAX_LABEL_CHARS
    assert left.startswith("research_the") and left.endswith("_left #2~3")


def test_the_ticks_of_one_axis_share_one_unit() -> None:
    from dagwright.telemetry.timeline import format_offset

    assert [format_offset(t, 30, 150) for t in (0, 30, 60, 90, 120, 150)] == [
        "0m00s", "0m30s", "1m00s", "1m30s", "2m00s", "2m30s",
    ]  # fmt: skip
    assert [format_offset(t, 20, 100) for t in (0, 60, 100)] == ["0s", "60s", "100s"]
    assert format_offset(3 * 3600, 1800, 4 * 3600) == "3h00m"
    assert format_offset(1800, 1800, 4 * 3600) == "0h30m"


def test_an_attempt_whose_end_was_trimmed_ends_at_the_next_claim() -> None:
    events = (
        Events()
        .add(100, "node.running", "a", attempt=1)
        .attempt("a", 2, 400, 500, "node.succeeded")
    )
    first, second = spans_named(build_trace(state(), events.items, [], now=at(0)), NODE_ATTEMPT)
    assert first.end == at(400) and first.attributes["outcome"] == "unknown"
    assert second.attributes["outcome"] == "succeeded"


def test_end_events_without_a_running_attempt_add_nothing_but_retries() -> None:
    events = (
        Events()
        .add(100, "node.cancelled", "queued-one", was="queued")
        .add(200, "node.retrying", "trimmed", delay_ms=5)
        .add(300, "node.blocked", "b", by="a")
    )
    trace = build_trace(state(), events.items, [], now=at(0))
    assert spans_named(trace, NODE_ATTEMPT) == []
    (retry,) = spans_named(trace, RETRY)
    assert retry.parent_id == RUN_ID and retry.node == "trimmed"


def test_the_planner_node_is_an_attempt_and_the_run_counts_its_plan() -> None:
    nodes = {
        "_plan": NodeState(status=NodeStatus.SUCCEEDED, type="planner"),
        "a": NodeState(status=NodeStatus.SUCCEEDED, type="function"),
    }
    events = (
        Events()
        .add(50, "node.running", "_plan", attempt=1)
        .llm_call(400, "_plan", 300)
        .add(450, "run.planned", nodes=1)
        .add(450, "node.succeeded", "_plan")
        .attempt("a", 1, 500, 600, "node.succeeded")
    )
    trace = build_trace(state(nodes=nodes), events.items, [], now=at(0))
    planner, node = spans_named(trace, NODE_ATTEMPT)
    assert node.node == "a" and node.start == at(500)
    assert planner.node == "_plan" and planner.attributes["worker_type"] == "planner"
    assert spans_named(trace, LLM_CALL)[0].parent_id == "_plan#1"
    assert trace.run_span.attributes["planned_nodes"] == 1


def test_the_trace_round_trips_through_json() -> None:
    events = Events().attempt("a", 1, 100, 900, "node.succeeded")
    trace = build_trace(state(), events.items, [recorded("t", "a#1", 200)], now=at(0))
    assert Trace.model_validate_json(trace.model_dump_json()) == trace


@pytest.mark.parametrize(
    ("kind", "outcome"), [("batch", "batch_wait"), ("celery_task", "celery_task_wait")]
)
def test_a_parked_wait_ends_its_attempt_as_what_it_waits_on(kind: str, outcome: str) -> None:
    """A celery_task node's claim that sent (or looked at) its team task ends parked, not
    failed: the trace says so, and no retry span is drawn."""
    events = Events().add(100, "node.running", "a", attempt=1, holder="host:1")
    events.add(300, "node.waiting", "a", **{kind: "x-1", "delay_ms": 30_000})
    trace = build_trace(state(), events.items, [], now=at(99_999))
    (attempt,) = spans_named(trace, NODE_ATTEMPT)
    assert attempt.attributes["outcome"] == outcome and attempt.status == "ok"
    assert spans_named(trace, RETRY) == []
