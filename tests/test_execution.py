"""Pure pieces of node execution: backoff, error classification, output encoding."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dagwright import PermanentError, RetryableError, RetryPolicy
from dagwright.orchestrator.execution.attempt import (
    describe_error,
    encode_output,
    holder_is_dead_here,
)
from dagwright.orchestrator.execution.backoff import compute_backoff


def test_backoff_doubles_up_to_the_cap_without_jitter() -> None:
    policy = RetryPolicy(backoff_s=1, backoff_max_s=5, jitter=False)
    assert [compute_backoff(policy, attempt) for attempt in range(1, 6)] == [1, 2, 4, 5, 5]


@given(st.integers(1, 40), st.floats(0, 1))
def test_jittered_backoff_stays_between_half_and_the_full_delay(attempt: int, draw: float) -> None:
    policy = RetryPolicy(backoff_s=0.5, backoff_max_s=30)
    full = min(30, 0.5 * 2 ** (attempt - 1))
    assert full / 2 <= compute_backoff(policy, attempt, rng=lambda: draw) <= full


def test_errors_are_retryable_unless_permanent() -> None:
    assert describe_error(RetryableError("x")).retryable
    assert describe_error(ValueError("x")).retryable
    permanent = describe_error(PermanentError("bad input"))
    assert not permanent.retryable and permanent.error_class == "PermanentError"
    assert permanent.message == "bad input"


def test_outputs_must_be_json_and_not_too_big() -> None:
    assert encode_output({"a": [1, 2]}, 100) == '{"a":[1,2]}'
    with pytest.raises(PermanentError, match="not JSON"):
        encode_output(float("nan"), 100)
    with pytest.raises(PermanentError, match="limit is 10"):
        encode_output("x" * 20, 10)


def test_only_a_dead_process_on_this_host_is_a_dead_holder() -> None:
    import os
    import socket

    assert not holder_is_dead_here(f"{socket.gethostname()}:{os.getpid()}")
    assert holder_is_dead_here(f"{socket.gethostname()}:999999999")
    assert not holder_is_dead_here("other-host:999999999")


def test_a_node_of_a_type_this_worker_lacks_fails_permanently(no_worker_settings: object) -> None:
    from dagwright.models import Plan
    from dagwright.orchestrator.execution.attempt import ExecutionEnv, Outcome, execute_node
    from dagwright.orchestrator.execution.leases import LeaseKeeper
    from dagwright.orchestrator.execution.services import RedisNodeServices
    from dagwright.orchestrator.runstate.store import new_run_id
    from dagwright.orchestrator.runtime import Runtime
    from dagwright.plans.validation import PlanLimits, validate_plan
    from dagwright.workers import WorkerRegistry, builtin_registry

    runtime = Runtime.from_settings(no_worker_settings)  # type: ignore[arg-type]
    plan = Plan.model_validate({"nodes": [{"id": "a", "type": "function", "function": "noop"}]})
    run_id = new_run_id()
    graph = validate_plan(plan, builtin_registry(), PlanLimits())
    runtime.store.create_run(run_id, graph, runtime.dispatch_for)

    class Broker:
        def publish(self, nodes: list[object]) -> list[object]:
            return nodes

        def queue_depth(self, queue: str) -> int:
            return 0

        def next_task_ids(self, queues: object, depth: int) -> list[str]:
            return []

    bare_runtime = dataclasses.replace(runtime, given_registry=WorkerRegistry())
    leases = LeaseKeeper(runtime.machine, lease_s=10, interval_s=1)
    broker = Broker()
    services = RedisNodeServices(runtime)
    env = ExecutionEnv(bare_runtime, broker, leases, services)  # type: ignore[arg-type]
    outcome = execute_node(env, run_id, "a", 1)
    assert outcome == Outcome.FAILED
    error = runtime.store.read_state(run_id).nodes["a"].error
    assert error is not None and "not registered in this worker" in error.message
