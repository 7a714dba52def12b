"""Driving the run state machine by hand on the test Valkey (no Celery): create a run,
claim and finish its nodes, read its events; a broker that records what it is given."""

from __future__ import annotations

from typing import Any

from dagwright.models import Plan
from dagwright.orchestrator.runstate.machine import Claim, Held
from dagwright.orchestrator.runstate.store import new_run_id
from dagwright.orchestrator.runtime import Runtime
from dagwright.plans.validation import PlanLimits, validate_plan
from dagwright.workers import builtin_registry

HOLDER = "test-host:1"


class RecordingBroker:
    """Publishes nothing, keeps what it was given: the tests drive the nodes by hand."""

    def __init__(self) -> None:
        self.published: list[Any] = []

    def publish(self, nodes: list[Any]) -> list[Any]:
        self.published.extend(nodes)
        return nodes

    def queue_depth(self, queue: str) -> int:
        return 0

    def next_task_ids(self, queues: object, depth: int) -> list[str]:
        return []


def start(
    runtime: Runtime, nodes: list[dict[str, Any]], *, own_functions: bool = False
) -> tuple[str, list[str]]:
    """Create a run; return its id and the roots queued (fence 1). ``own_functions``: its
    nodes may name the tests' functions (tests/support/functions.py), as the runtime's
    registry has them, not only the built-in ones."""
    plan = Plan.model_validate(
        {"nodes": [{"type": "function", "function": "noop", **n} for n in nodes]}
    )
    graph = validate_plan(
        plan, runtime.registry if own_functions else builtin_registry(), PlanLimits()
    )
    run_id = new_run_id()
    ready = runtime.store.create_run(run_id, graph, runtime.dispatch_for)
    return run_id, [node.node_id for node in ready]


def claim(
    runtime: Runtime, run_id: str, node: str, fence: int = 1, **kwargs: Any
) -> Claim | Held | None:
    return runtime.machine.claim(
        run_id,
        node,
        fence,
        lease_s=kwargs.pop("lease_s", 30),
        holder=kwargs.pop("holder", HOLDER),
        **kwargs,
    )


def finish(runtime: Runtime, run_id: str, node: str, fence: int = 1, output: str = "null") -> Any:
    assert isinstance(claim(runtime, run_id, node, fence), Claim)
    return runtime.machine.complete(run_id, node, fence, output)


def kinds(runtime: Runtime, run_id: str, node: str | None = None) -> list[str]:
    return [e.kind for e in runtime.store.read_events(run_id) if node is None or e.node == node]
