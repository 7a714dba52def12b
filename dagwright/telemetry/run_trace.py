"""A run's trace: every span of one run, built from what Redis already holds.

``build_trace(state, events, recorded, now)`` is a pure function of three inputs read in
one round trip (``telemetry/trace_reads.py``):

- the run's state, for its status, times and each node's worker type and last error;
- its ``events`` stream, from which come the node-attempt spans (a ``node.running``
  event opens an attempt; the node's next outcome event closes it), the LLM-call spans
  (an ``llm.call`` event is written when the call has returned: it started
  ``latency_ms`` earlier) and the retries (``node.retrying``, and ``node.waiting``: a
  breaker was open);
- its ``spans`` stream: what the events do not see (tool calls, sandbox runs, breaker
  events), each naming its attempt as parent (``attempt_span_id``).

The trace is flat: one list of spans, the run span first, each other span naming its
parent. That is the JSON ``dagwright trace --format json`` prints (the ``Trace`` model,
``version`` 1), what the OTLP export sends, and what the tree and the timeline are drawn
from. The goal's text is left out (it is the user's data, and can be long); no span
carries a secret, since none of its sources does.

Attempt ids: an attempt given back (its node parked for a concurrency slot, waiting for
an approval or an open breaker) is claimed again under the same attempt number, so
``<node>#<attempt>`` may name several claims. The first keeps that id, the next ones are
``<node>#<attempt>~2``, ``~3``...; a recorded span naming ``<node>#<attempt>`` is put
under the claim that was running when it started.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict

from dagwright.models import Event, RunState, RunStatus
from dagwright.telemetry.spans import (
    LLM_CALL,
    NODE_ATTEMPT,
    RETRY,
    RUN,
    AttributeValue,
    Span,
    attempt_span_id,
)

TRACE_FORMAT_VERSION = 1
ATTEMPT_ERROR_CHARS = 200  # a failed attempt's error message, shortened: a trace is a summary

Outcome = Literal[
    "running",  # still running when the trace was read
    "succeeded",
    "failed",  # failed for good (dead-lettered)
    "retrying",  # failed, will be retried
    "breaker_open",  # refused by an open breaker: waits it out, the attempt given back
    "batch_wait",  # its LLM call waits in a Message Batch: parked, the attempt given back
    "celery_task_wait",  # its task runs on the team's Celery workers: parked, no slot held
    "lease_expired",  # its worker stopped renewing the lease (died or hung)
    "taken_over",  # another worker took the node over from a dead one
    "cancelled",  # the run was cancelled or timed out
    "waiting_approval",  # stopped to wait for a person
    "parked",  # a concurrency limit was full: waits for a slot, the attempt given back
    "unknown",  # its end is not in the (trimmed) event stream
]

# The events that end a node's running attempt, and what each says of it.
ENDING_EVENTS: dict[str, Outcome] = {
    "node.succeeded": "succeeded",
    "node.failed": "failed",
    "node.retrying": "retrying",
    "node.waiting": "breaker_open",
    "node.lease_expired": "lease_expired",
    "node.takeover": "taken_over",
    "node.cancelled": "cancelled",
    "node.waiting_approval": "waiting_approval",
    "node.parked": "parked",
}
# A node.waiting event's field named after its wait's kind (retry.lua) holds what it waits on.
WAIT_OUTCOMES: dict[str, Outcome] = {"batch": "batch_wait", "celery_task": "celery_task_wait"}
FAILED_OUTCOMES = frozenset({"failed", "retrying", "breaker_open", "lease_expired", "taken_over"})


class Trace(BaseModel):
    """Every span of one run: the run span first, then the others by start time.

    Every span but the run span has a ``parent_id`` (the run span's id is the run id).
    ``end`` is the run's end, or the time the trace was read if it is still open.
    """

    model_config = ConfigDict(frozen=True)

    version: int = TRACE_FORMAT_VERSION
    run_id: str
    status: RunStatus
    start: datetime
    end: datetime
    finished: bool
    nodes: int
    spans: list[Span]

    @property
    def run_span(self) -> Span:
        return self.spans[0]

    @property
    def duration_s(self) -> float:
        return (self.end - self.start).total_seconds()

    def attempts(self) -> list[Span]:
        """The node-attempt spans, by start time."""
        return [span for span in self.spans if span.name == NODE_ATTEMPT]

    def children(self) -> dict[str, list[Span]]:
        """Span id -> its children, by start time."""
        found: dict[str, list[Span]] = {}
        for span in self.spans[1:]:
            found.setdefault(span.parent_id or self.run_id, []).append(span)
        return found


def build_trace(
    state: RunState, events: Iterable[Event], recorded: Iterable[Span], now: datetime
) -> Trace:
    """The trace of ``state``'s run from its events and recorded spans, as of ``now``
    (the end of what is still open). Linear in events and spans, but for one sort."""
    end = state.finished_at or now
    attempts = AttemptTracker(state)
    for event in events:
        attempts.see(event)
    attempts.close_open(end, still_running=not state.status.is_final)
    derived = attempts.spans
    spans = derived + attach(recorded, attempts, state.run_id)
    spans.sort(key=lambda span: span.start)
    return Trace(
        run_id=state.run_id,
        status=state.status,
        start=state.created_at,
        end=end,
        finished=state.status.is_final,
        nodes=state.counts.total,
        spans=[run_span(state, end, attempts.planned_nodes), *spans],
    )


def run_span(state: RunState, end: datetime, planned_nodes: int | None) -> Span:
    attributes: dict[str, AttributeValue] = {
        "status": state.status.value,
        "nodes": state.counts.total,
        "succeeded": state.counts.succeeded,
        "failed": state.counts.failed,
    }
    if state.counts.skipped:  # run_if rules left nodes out: say so, not only by their absence
        attributes["skipped"] = state.counts.skipped
    if state.usage.llm_calls:
        attributes |= {
            "llm_calls": state.usage.llm_calls,
            "input_tokens": state.usage.input_tokens,
            "output_tokens": state.usage.output_tokens,
            "cost_usd": state.usage.cost_usd,
        }
        for name in ("web_search_requests", "web_fetch_requests"):
            if getattr(state.usage, name):  # the API's server tools ran
                attributes[name] = getattr(state.usage, name)
        if state.usage.unpriced_tokens:  # the cost is a lower bound: say so
            attributes["unpriced_tokens"] = state.usage.unpriced_tokens
    if planned_nodes is not None:
        attributes["planned_nodes"] = planned_nodes
    if state.reason:
        attributes["reason"] = state.reason
    return Span(
        span_id=state.run_id,
        name=RUN,
        start=state.created_at,
        end=end,
        status="error" if state.status == RunStatus.FAILED else "ok",
        attributes=attributes,
    )


@dataclass
class OpenAttempt:
    span_id: str
    node: str
    attempt: int
    start: datetime
    holder: str
    llm_calls: int = 0


@dataclass
class AttemptTracker:
    """Walks the events in order, opening and closing node attempts."""

    state: RunState
    spans: list[Span] = field(default_factory=list)
    open: dict[str, OpenAttempt] = field(default_factory=dict)
    claims: dict[str, list[Span]] = field(default_factory=dict)  # "<node>#<n>" -> claims
    planned_nodes: int | None = None

    def see(self, event: Event) -> None:
        node = event.node
        if event.kind == "run.planned":
            self.planned_nodes = int(event.data.get("nodes", 0))
        elif node is None:
            return
        elif event.kind == "node.running":
            self._open(node, event)
        elif event.kind == LLM_CALL:
            self.spans.append(self._llm_call(node, event))
        elif event.kind in ENDING_EVENTS:
            self._end(node, event)

    def _open(self, node: str, event: Event) -> None:
        if node in self.open:  # its end was trimmed from the stream
            self._close(node, event.at, "unknown")
        attempt = int(event.data.get("attempt", 0))
        logical = attempt_span_id(node, attempt)
        claim = len(self.claims.get(logical, ()))  # its earlier claims are all closed
        span_id = logical if claim == 0 else f"{logical}~{claim + 1}"
        self.open[node] = OpenAttempt(
            span_id, node, attempt, event.at, event.data.get("holder", "")
        )

    def _end(self, node: str, event: Event) -> None:
        outcome = ENDING_EVENTS[event.kind]
        if outcome == "breaker_open":  # retry.lua's wait kind names what it waits on
            kinds = [kind for kind in WAIT_OUTCOMES if kind in event.data]
            outcome = WAIT_OUTCOMES[kinds[0]] if kinds else outcome
        parent = self.open.get(node)
        if outcome in ("retrying", "breaker_open"):
            self.spans.append(self._retry(node, event, parent))
        if parent is not None:
            self._close(node, event.at, outcome)

    def close_open(self, end: datetime, *, still_running: bool) -> None:
        for node in list(self.open):
            self._close(node, end, "running" if still_running else "unknown")

    def _close(self, node: str, end: datetime, outcome: Outcome) -> None:
        attempt = self.open.pop(node)
        span = Span(
            span_id=attempt.span_id,
            parent_id=self.state.run_id,
            name=NODE_ATTEMPT,
            node=node,
            attempt=attempt.attempt,
            start=attempt.start,
            end=max(end, attempt.start),
            status="error" if outcome in FAILED_OUTCOMES else "ok",
            attributes=self._attempt_attributes(attempt, outcome),
        )
        self.spans.append(span)
        logical = attempt_span_id(node, attempt.attempt)
        self.claims.setdefault(logical, []).append(span)

    def _attempt_attributes(
        self, attempt: OpenAttempt, outcome: Outcome
    ) -> dict[str, AttributeValue]:
        node_state = self.state.nodes.get(attempt.node)
        attributes: dict[str, AttributeValue] = {
            "worker_type": node_state.type if node_state else "",
            "outcome": outcome,
            "holder": attempt.holder,
        }
        if outcome == "failed" and node_state is not None and node_state.error is not None:
            attributes["error_class"] = node_state.error.error_class
            attributes["error_message"] = node_state.error.message[:ATTEMPT_ERROR_CHARS]
        return attributes

    def _llm_call(self, node: str, event: Event) -> Span:
        data = event.data
        parent = self.open.get(node)
        if parent is not None:
            parent.llm_calls += 1
            span_id = f"{parent.span_id}/llm-{parent.llm_calls}"
        else:
            span_id = f"{node}/llm@{event.id}"
        latency_ms = int(data.get("latency_ms", 0))
        return Span(
            span_id=span_id,
            parent_id=parent.span_id if parent else self.state.run_id,
            name=LLM_CALL,
            node=node,
            attempt=parent.attempt if parent else None,
            start=event.at - timedelta(milliseconds=latency_ms),
            end=event.at,
            attributes={
                "model": data.get("model", ""),
                "input_tokens": int(data.get("input_tokens", 0)),
                "output_tokens": int(data.get("output_tokens", 0)),
                "cost_usd": float(data.get("cost_usd", 0.0)),
                "latency_ms": latency_ms,
                "cached": data.get("cached", "0") == "1",
                **unpriced_tokens(data),
                **cache_read_tokens(data),
            },
        )

    def _retry(self, node: str, event: Event, parent: OpenAttempt | None) -> Span:
        attributes: dict[str, AttributeValue] = {"delay_ms": int(event.data.get("delay_ms", 0))}
        for name in ("error_class", "breaker"):
            if event.data.get(name):
                attributes[name] = event.data[name]
        return Span(
            span_id=f"{parent.span_id}/retry" if parent else f"{node}/retry@{event.id}",
            parent_id=parent.span_id if parent else self.state.run_id,
            name=RETRY,
            node=node,
            attempt=parent.attempt if parent else None,
            start=event.at,
            end=event.at,
            status="error",
            attributes=attributes,
        )

    def claim_at(self, logical_id: str, at: datetime) -> Span | None:
        """The claim of attempt ``<node>#<n>`` that was running at ``at`` (else the last
        one started before it, else the first)."""
        claims = self.claims.get(logical_id)
        if not claims:
            return None
        starts = [claim.start for claim in claims]
        index = bisect.bisect_right(starts, at) - 1
        return claims[max(index, 0)]


def attach(recorded: Iterable[Span], attempts: AttemptTracker, run_id: str) -> list[Span]:
    """The recorded spans, each under the span it names if the trace has it (the claim
    running at the time, for an attempt), else under the run."""
    spans = list(recorded)
    recorded_ids = {span.span_id for span in spans}
    attached = []
    for span in spans:
        parent_id = run_id
        if span.parent_id is not None:
            claim = attempts.claim_at(span.parent_id, span.start)
            if claim is not None:
                parent_id = claim.span_id
            elif span.parent_id in recorded_ids:
                parent_id = span.parent_id
        attached.append(span if parent_id == span.parent_id else _with_parent(span, parent_id))
    return attached


def _with_parent(span: Span, parent_id: str) -> Span:
    return span.model_copy(update={"parent_id": parent_id})


def unpriced_tokens(data: dict[str, str]) -> dict[str, int]:
    """An llm.call's tokens of a model with no price, as an attribute where there are any."""
    tokens = int(data.get("unpriced_tokens", 0))
    return {"unpriced_tokens": tokens} if tokens else {}


def cache_read_tokens(data: dict[str, str]) -> dict[str, int]:
    """An llm.call's input tokens read from the prompt cache, where its event says (events
    written before they were recorded say nothing, and get no attribute)."""
    tokens = data.get("cache_read_input_tokens")
    return {"cache_read_input_tokens": int(tokens)} if tokens is not None else {}
