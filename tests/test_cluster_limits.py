"""Concurrency limits with their state on a real 3-primary Valkey Cluster (decision 117).

Each limit has a slot of its own (``{limits:<name>}``); on a Cluster a node takes its run,
type and key limits one step each, in that order, and gives back what it took when a
later one refuses. Here: the semaphore suites written for one Valkey run unchanged on the
cluster (this module's ``runtime`` is the cluster's), the give-back wakes whom
the moment's hold refused, a worker dying between the steps is repaired by the
reconciler, the registry's tidy never loses a used limit, and a worker type's limit holds
through real workers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.models import Plan
from dagwright.orchestrator.control.run_request import RunRequest
from dagwright.orchestrator.control.submission import start_run
from dagwright.orchestrator.execution.attempt import Outcome, execute_node
from dagwright.orchestrator.execution.limits import Limit, NodeLimits, Waiter
from dagwright.orchestrator.execution.reconciler import Reconciler
from dagwright.orchestrator.runtime import Runtime
from tests.support.functions import overlap_key
from tests.support.processes import Workers
from tests.support.runstate import RecordingBroker
from tests.support.waiting import wait_until
from tests.test_limits import (  # noqa: F401
    execution_env,
    limits_of,
    slots,
    test_a_node_over_its_runs_limit_is_parked_without_using_an_attempt,
    test_a_node_takes_every_slot_it_needs_or_none,
    test_a_renewed_slot_does_not_expire,
    test_a_waiter_keeps_the_time_it_first_asked_when_it_moves_to_another_limit,
    test_the_reconciler_wakes_waiters_when_a_dead_workers_slot_expires,
    test_the_slot_of_a_holder_that_stopped_renewing_it_frees_itself,
    test_waiters_whose_node_no_longer_waits_are_dropped,
    test_waiting_nodes_keep_their_place,
)


@pytest.fixture
def runtime(cluster_settings: Settings) -> Runtime:
    """The imported suites' runtime: state on the cluster."""
    return Runtime.from_settings(cluster_settings)


class WorkerDied(BaseException):
    """The process holding a ``NodeLimits`` is gone (as a SIGKILL leaves it)."""


def after_first_step(limits: NodeLimits, then: Callable[[], Any]) -> None:
    """Run ``then`` right after ``limits``' first step of a take (between two limits)."""
    step = limits._take_step
    calls = []

    def step_then(*args: Any) -> Any:
        reply = step(*args)
        calls.append(reply)
        if len(calls) == 1:
            then()
        return reply

    limits._take_step = step_then  # type: ignore[method-assign]


def test_a_node_refused_by_its_type_gives_its_run_slot_back_and_wakes_who_it_held_off(
    runtime: Runtime,
) -> None:
    limits, other = limits_of(runtime), limits_of(runtime)
    run, kind = Limit("run:r1", 1), Limit("type:coder", 1)
    assert other.acquire(slots("r9", "busy", kind)) is None  # the type is full
    # Between a's run step and its type step, b (same run) asks and is refused by the run.
    after_first_step(limits, lambda: other.acquire(slots("r1", "b", run)))
    taking = limits.take(slots("r1", "a", run, kind))
    assert taking.waits_for == "type:coder"
    assert taking.woken == (Waiter("run:r1", "r1", "b"),)
    assert runtime.client.zrange(runtime.keys.limit_holders("run:r1"), 0, -1) == []
    assert runtime.client.zrange(runtime.keys.limit_waiters("type:coder"), 0, -1) == ["r1/a"]
    assert runtime.client.hgetall(runtime.keys.limits) == {"run:r1": "1", "type:coder": "1"}


def test_a_worker_dead_between_two_limits_leaves_a_slot_the_reconciler_frees(
    runtime: Runtime,
) -> None:
    broker = RecordingBroker()
    env = execution_env(runtime, broker)
    plan = Plan.model_validate({"nodes": [{"id": "b", "type": "function", "function": "noop"}]})
    run_id = start_run(runtime, broker, RunRequest(plan=plan, max_concurrent_nodes=1))
    run, kind = Limit(f"run:{run_id}", 1), Limit("type:gone", 1)
    dead = limits_of(runtime, slot_ttl_s=0.5)

    def die() -> None:
        raise WorkerDied("between its run step and its type step")

    after_first_step(dead, die)
    with pytest.raises(WorkerDied):
        dead.take(slots(run_id, "gone", run, kind))
    holders = runtime.client.zrange(runtime.keys.limit_holders(run.name), 0, -1)
    assert holders == [f"{run_id}/gone@1"]  # taken, never renewed, never registered
    assert runtime.client.exists(runtime.keys.limit_holders(kind.name)) == 0

    assert execute_node(env, run_id, "b", 1) == Outcome.PARKED  # b registers the run limit
    broker.published.clear()
    reconciler = Reconciler(runtime, broker)
    wait_until(lambda: reconciler.run_once() and broker.published, timeout=10, what="b published")
    assert [n.node_id for n in broker.published] == ["b"]
    assert execute_node(env, run_id, "b", 1) == Outcome.SUCCEEDED


def test_the_registrys_tidy_keeps_a_limit_taken_while_it_tidied(runtime: Runtime) -> None:
    """The reconciler's wake finds a limit empty and deletes it from the registry; a node
    that took a slot in between (its registration before the delete) is found by the
    re-check, and the limit goes back."""
    limits = limits_of(runtime)
    one = Limit("type:tidy", 1)
    hdel = runtime.client.hdel

    def hdel_after_a_take(*args: Any) -> Any:
        limits_of(runtime).acquire(slots("r", "late", one))  # step and registration
        return hdel(*args)

    runtime.client.hdel = hdel_after_a_take  # type: ignore[method-assign]
    try:
        assert limits.wake([one]) == []  # empty: tidied, and kept
    finally:
        del runtime.client.hdel
    assert runtime.client.hgetall(runtime.keys.limits) == {"type:tidy": "1"}
    limits.release(slots("r", "late", one))
    assert runtime.client.hgetall(runtime.keys.limits) == {}


def test_a_worker_types_limit_and_each_runs_hold_through_real_workers_on_the_cluster(
    cluster_settings: Settings, workers: Workers
) -> None:
    """Two limits per node, a step each: the type's (2) binds across four runs of one
    place each (their own limits, other slots)."""
    settings = cluster_settings.model_copy(update={"concurrency_limits": {"function": 2}})
    workers.start(settings, concurrency=6, pool="threads")
    client = Client(settings)
    plan = PlanBuilder("shared")
    for index in range(4):
        plan.function(f"n{index}", "overlap", params={"seconds": 0.3, "group": "shared"})
    handles = [client.submit(plan.build(), max_concurrent_nodes=1) for _ in range(4)]
    for handle in handles:
        state = handle.wait(timeout=90)
        assert state.status == RunStatus.SUCCEEDED, workers.log_tails()
        assert all(node.attempts == 1 for node in state.nodes.values())  # parking is free
    assert client.runtime.client.hget(overlap_key("shared"), "max") == "2"
    parked = [e for h in handles for e in h.events(follow=False) if e.kind == "node.parked"]
    assert any("type:function" in str(e) for e in parked)
    registry = client.runtime.keys.limits
    wait_until(lambda: not client.runtime.client.exists(registry), timeout=10, what="no limit left")
