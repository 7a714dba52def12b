"""The JSON shapes of runs, nodes, events, approvals and dead letters: one function per
shape, shared by the CLI's ``--json`` and the HTTP API so the two never drift apart.

``dagwright status --json`` and ``GET /api/v1/runs/{run_id}`` print the same ``run_json``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from dagwright.models import Approval, Event, NodeState, NodeStatus, RunState, Usage

if TYPE_CHECKING:
    from dagwright.dlq import DeadLetter


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def node_json(node: NodeState) -> dict[str, Any]:
    """One node of ``run_json``: its status, output, error and spend, and the nodes it
    depends on (what a drawing of the DAG takes its edges from)."""
    error = node.error if node.status == NodeStatus.FAILED else None
    waiting = node.waiting
    return {
        "status": node.status.value,
        "type": node.type,
        "depends_on": list(node.depends_on),
        "output": node.output,
        "attempts": node.attempts,
        "started_at": iso(node.started_at),
        "finished_at": iso(node.finished_at),
        "error": {"class": error.error_class, "message": error.message} if error else None,
        "usage": usage_json(node.usage) if node.usage.llm_calls else None,
        "waiting": {**waiting.model_dump(mode="json"), "description": waiting.describe()}
        if waiting
        else None,
    }


def usage_json(usage: Usage) -> dict[str, Any]:
    """Usage with ``cost_usd`` null where part of it is unpriced (``unpriced_tokens``):
    a script must not read an unknown cost as $0; ``priced_cost_usd`` is its known part."""
    return {
        **usage.model_dump(),
        "cost_usd": usage.known_cost_usd,
        "priced_cost_usd": usage.cost_usd,
    }


def run_json(state: RunState) -> dict[str, Any]:
    """The stable JSON shape of a run (``run --json``, ``status --json``, the API's run)."""
    return {
        "run_id": state.run_id,
        "status": state.status.value,
        "goal": state.goal,
        "created_at": iso(state.created_at),
        "finished_at": iso(state.finished_at),
        "counts": state.counts.model_dump(),
        "nodes": {node_id: node_json(node) for node_id, node in state.nodes.items()},
        "result": state.result,
        "usage": usage_json(state.usage),
        "budget": state.budget.model_dump(exclude_none=True) if state.budget else None,
        "reason": state.reason,
        "response_cache": state.response_cache,
        "inputs": state.inputs,
        # a stopped run kept open for its teardown nodes: the status it will end with
        "tearing_down": state.tearing_down.value if state.tearing_down else None,
    }


def event_json(event: Event) -> dict[str, Any]:
    """An event as ``dagwright events --json`` prints it (its data typed by its kind)."""
    return {**event.model_dump(mode="json"), "data": event.typed_data()}


def approval_json(approval: Approval) -> dict[str, Any]:
    """An approval request as ``approvals list --json`` prints it."""
    data = approval.model_dump(mode="json")
    data["status"] = approval.status.value
    data["requested_at"] = iso(approval.requested_at)
    data["deadline"] = iso(approval.deadline)
    return data


def letter_json(letter: DeadLetter, *, full: bool) -> dict[str, Any]:
    """A dead letter; without ``full``, its traceback and node spec are left out (lists)."""
    data = letter.model_dump(mode="json")
    if not full:
        data.pop("traceback")
        data.pop("spec")
    return data
