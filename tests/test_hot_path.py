"""The hot path's cost in Redis round trips: a no-op node must take at most 4.

Counted on the real Valkey through the worker's own code path (``execute_node`` in the
environment a Celery worker builds, publishing through Celery to the broker): every
``send_packed_command`` of a redis-py connection, state store and broker alike, is one
round trip (a pipeline sends all of its commands in one).
"""

from __future__ import annotations

from typing import Any

import pytest

from dagwright.models import Plan
from dagwright.orchestrator.execution.attempt import ExecutionEnv, Outcome, execute_node
from dagwright.orchestrator.runstate.store import new_run_id
from dagwright.orchestrator.runtime import Runtime
from dagwright.plans.validation import PlanLimits, validate_plan
from dagwright.workers import builtin_registry
from tests.support.round_trips import counting_round_trips

MAX_ROUND_TRIPS_PER_NODE = 4


def start_run(runtime: Runtime, plan: dict[str, Any]) -> str:
    run_id = new_run_id()
    graph = validate_plan(Plan.model_validate(plan), builtin_registry(), PlanLimits())
    runtime.store.create_run(run_id, graph, runtime.dispatch_for)
    return run_id


def noop(node_id: str, *deps: str) -> dict[str, Any]:
    return {"id": node_id, "type": "function", "function": "noop", "depends_on": list(deps)}


def test_a_noop_node_takes_at_most_four_round_trips(
    worker_env: ExecutionEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Warm up: once per process, the lease threads start, the scripts are loaded and the
    # broker's connection is made.
    warm_up = start_run(worker_env.runtime, {"nodes": [noop("w1"), noop("w2", "w1")]})
    for node_id in ("w1", "w2"):
        assert execute_node(worker_env, warm_up, node_id, 1) == Outcome.SUCCEEDED
    run_id = start_run(worker_env.runtime, {"nodes": [noop("a"), noop("b", "a")]})
    with counting_round_trips(monkeypatch) as middle:
        assert execute_node(worker_env, run_id, "a", 1) == Outcome.SUCCEEDED
    with counting_round_trips(monkeypatch) as last:
        assert execute_node(worker_env, run_id, "b", 1) == Outcome.SUCCEEDED
    print("middle node:", *middle, sep="\n  ")
    print("last node:", *last, sep="\n  ")
    assert len(middle) <= MAX_ROUND_TRIPS_PER_NODE, middle
    assert len(last) <= MAX_ROUND_TRIPS_PER_NODE, last
