"""One node, in full: what the dashboard's node panel and ``GET .../nodes/{node_id}`` show.

Read from what Redis already holds: the node's state, its plan entry (``spec``), the
outputs of its dependencies (its inputs), its last checkpoint (an agent's conversation:
the transcript) and its spans in the run's trace (each LLM call's tokens and cost).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dagwright.errors import UnknownNodeError
from dagwright.json_views import iso, node_json
from dagwright.models import Node, RunState
from dagwright.orchestrator.runstate.store import RunStore
from dagwright.plans.mapping import child_inputs
from dagwright.redaction import redact
from dagwright.telemetry.run_trace import Trace
from dagwright.telemetry.spans import LLM_CALL, Span
from dagwright.telemetry.trace_reads import read_trace

if TYPE_CHECKING:
    from dagwright.orchestrator.control.worker_waits import WorkerWaits


@dataclass(frozen=True)
class LLMCall:
    """One LLM call of the node, from its ``llm.call`` span."""

    model: str
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int | None
    cost_usd: float
    duration_ms: int
    started_at: str | None

    @classmethod
    def from_span(cls, span: Span) -> LLMCall:
        attributes = span.attributes
        cache_read = attributes.get("cache_read_input_tokens")
        return cls(
            model=str(attributes.get("model", "")),
            input_tokens=int(attributes.get("input_tokens", 0)),
            output_tokens=int(attributes.get("output_tokens", 0)),
            cache_read_input_tokens=int(cache_read) if cache_read is not None else None,
            cost_usd=float(attributes.get("cost_usd", 0.0)),
            duration_ms=int(attributes.get("latency_ms", span.duration_s * 1000)),
            started_at=iso(span.start),
        )


@dataclass(frozen=True)
class NodeDetail:
    """A node's state (as ``run_json`` shows it) with its spec, inputs, transcript, LLM
    calls and trace spans."""

    run_id: str
    node_id: str
    state: dict[str, Any]
    spec: dict[str, Any]
    inputs: dict[str, Any]
    transcript: list[dict[str, Any]]
    llm_calls: list[LLMCall]
    spans: list[Span]
    transcript_gone: str = ""
    """Why ``transcript`` is empty although the node may have kept one: its run dropped
    its checkpoints at its end (``checkpoint_retention_s``), or they have expired."""

    def to_json(self) -> dict[str, Any]:
        gone = {"transcript_gone": self.transcript_gone} if self.transcript_gone else {}
        return {
            "run_id": self.run_id,
            "node_id": self.node_id,
            **self.state,
            "spec": self.spec,
            "inputs": self.inputs,
            "transcript": self.transcript,
            "llm_calls": [call.__dict__ for call in self.llm_calls],
            "spans": [span.model_dump(mode="json") for span in self.spans],
            **gone,
        }


def read_node_detail(
    store: RunStore,
    run_id: str,
    node_id: str,
    worker_waits: WorkerWaits | None = None,
    secrets: tuple[str, ...] = (),
) -> NodeDetail:
    """The node ``node_id`` of run ``run_id`` (UnknownRunError, UnknownNodeError); with
    ``worker_waits``, saying so if it is queued and no live worker serves it. The
    transcript is what the model wrote too: ``secrets`` are masked in it."""
    state = store.read_state(run_id)
    if worker_waits is not None:
        state = worker_waits.annotate(state)
    node = state.nodes.get(node_id)
    if node is None:
        raise UnknownNodeError(run_id, node_id)
    spec, checkpoint = store.node_records(run_id, node_id)
    spans = node_spans(read_trace(store, run_id), node_id)
    return NodeDetail(
        run_id=run_id,
        node_id=node_id,
        state=node_json(node),
        spec=json.loads(spec) if spec else {},
        inputs=received(spec, inputs_of(state, node.depends_on)),
        transcript=masked(transcript_of(json.loads(checkpoint) if checkpoint else None), secrets),
        llm_calls=[LLMCall.from_span(span) for span in spans if span.name == LLM_CALL],
        spans=spans,
        transcript_gone="" if checkpoint else checkpoints_gone(store.checkpoints_kept(run_id)),
    )


def checkpoints_gone(kept: str | None) -> str:
    """What the run hash's ``checkpoints`` (compact.lua) says of its nodes' transcripts:
    '' if nothing was dropped."""
    if kept is None:
        return ""
    if kept == "dropped":
        return "checkpoints dropped at the end of the run (setting checkpoint_retention_s)"
    until = datetime.fromtimestamp(int(kept) / 1000, tz=UTC).isoformat(timespec="seconds")
    return f"checkpoints kept until {until} after the run (setting checkpoint_retention_s)"


def inputs_of(state: RunState, depends_on: list[str]) -> dict[str, Any]:
    """What the node received: the output of each dependency, by its id."""
    return {dep: state.nodes[dep].output for dep in depends_on if dep in state.nodes}


def received(spec: str | None, inputs: dict[str, Any]) -> dict[str, Any]:
    """A map child's inputs hold its item, not its map's whole list (plans/mapping.py)."""
    node = Node.model_validate_json(spec) if spec else None
    if node is None or node.map is None or node.map.index is None:
        return inputs
    return child_inputs(node, inputs)


def masked(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` with every string in it redacted (a transcript holds what the model
    wrote, which may quote a secret it saw)."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list):
        return [masked(item, secrets) for item in value]
    if isinstance(value, dict):
        return {key: masked(item, secrets) for key, item in value.items()}
    return value


def transcript_of(checkpoint: Any) -> list[dict[str, Any]]:
    """The messages of an agent's checkpoint, as stored ([] for a node that keeps none)."""
    if isinstance(checkpoint, dict) and isinstance(checkpoint.get("messages"), list):
        return [message for message in checkpoint["messages"] if isinstance(message, dict)]
    return []


def node_spans(trace: Trace, node_id: str) -> list[Span]:
    """The node's spans of the run's trace (attempts, LLM and tool calls...), by start."""
    return [span for span in trace.spans[1:] if span.node == node_id]
