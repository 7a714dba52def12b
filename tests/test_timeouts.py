"""Timeouts, enforced by dagwright itself: a node's ``timeout_s`` in every pool (here the
threads pool, which ignores Celery's time limits), and a run's wall-clock timeout."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from dagwright import Client, PlanBuilder, RunFailedError, RunStatus, Settings
from dagwright.errors import DeadLetterError, InputError
from dagwright.models import Plan
from dagwright.orchestrator.runstate.machine import ReconcilePass
from dagwright.orchestrator.runstate.store import new_run_id
from dagwright.orchestrator.runtime import Runtime
from dagwright.plans.validation import PlanLimits, validate_plan
from dagwright.workers import builtin_registry
from tests.support.cli import cli_env, dagwright, json_out, one_error_line
from tests.support.functions import executions_key
from tests.support.sandboxes import marked_program, processes_marked, require_a_sandbox
from tests.support.waiting import wait_until

ONCE: dict[str, Any] = {"max_attempts": 1}


def test_a_node_waiting_on_ctx_sleep_times_out_in_the_threads_pool(
    client: Client, worker: object
) -> None:
    plan = PlanBuilder()
    plan.function("nap", "sleep", params={"seconds": 60}, timeout_s=1.5, retry=ONCE)
    run = client.submit(plan.build())
    with pytest.raises(RunFailedError, match=r"ran out of time: its timeout_s is 1\.5s"):
        run.result(timeout=20)
    node = run.status().nodes["nap"]
    assert node.error is not None and node.error.error_class == "NodeTimeoutError"
    assert node.started_at and node.finished_at
    assert 1.5 <= (node.finished_at - node.started_at).total_seconds() < 3.5
    [letter] = client.dlq.list(run_id=run.run_id)
    assert letter.classification == "timeout"


def test_a_timed_out_node_is_retried_per_its_policy(client: Client, worker: object) -> None:
    plan = PlanBuilder()
    plan.function(
        "nap",
        "sleep",
        params={"seconds": 60},
        timeout_s=0.5,
        retry={"max_attempts": 2, "backoff_s": 0.1, "jitter": False},
    )
    run = client.submit(plan.build())
    with pytest.raises(RunFailedError, match="NodeTimeoutError"):
        run.result(timeout=20)
    assert run.status().nodes["nap"].attempts == 2


def test_a_node_ignoring_ctx_times_out_and_its_late_result_is_refused(
    client: Client, worker: object
) -> None:
    plan = PlanBuilder()
    plan.function("careless", "stubborn", params={"seconds": 3}, timeout_s=1, retry=ONCE)
    run = client.submit(plan.build())
    state = run.wait(timeout=20)
    assert state.status == RunStatus.FAILED
    assert state.nodes["careless"].error.error_class == "NodeTimeoutError"  # type: ignore[union-attr]
    # Its thread cannot be killed: it runs to the end, and what it returns is dropped.
    executions = client.runtime.client
    wait_until(
        lambda: executions.hget(executions_key(run.run_id), "careless") == "1",
        timeout=20,
        what="the careless function to return",
    )
    after = client.status(run.run_id)
    assert after.nodes["careless"].status == "failed" and after.nodes["careless"].output is None
    assert "node.succeeded" not in [event.kind for event in run.events(follow=False)]


@pytest.mark.sandbox
def test_a_sandboxed_program_past_its_node_timeout_is_killed(
    client: Client, worker: object
) -> None:
    require_a_sandbox()
    marker = f"dagwright-test-{uuid.uuid4().hex}"
    plan = PlanBuilder()
    plan.python("long", marked_program(marker), timeout_s=3)
    run = client.submit(plan.build())
    wait_until(lambda: processes_marked(marker), timeout=30, what="the program running")
    state = run.wait(timeout=30)
    node = state.nodes["long"]
    assert node.error is not None and node.error.error_class == "NodeTimeoutError"
    assert node.attempts == 1  # a python node's timeout is final: the code would again
    # The lease keeper stops the node and the sandbox kills the program's processes; on a
    # loaded machine (a test run beside the suite) that took over 5 s once.
    wait_until(lambda: not processes_marked(marker), timeout=20, what="the program killed")


def test_a_run_past_its_run_timeout_is_stopped_with_its_reason(
    client: Client, worker: object, settings: Settings
) -> None:
    plan = PlanBuilder("too slow")
    plan.function("a", "sleep", params={"seconds": 60})
    plan.function("b", "sleep", params={"seconds": 60})
    plan.function("after", "noop", depends_on=["a", "b"])
    run = client.submit(plan.build(), timeout_s=2)
    state = run.wait(timeout=30)
    assert state.status == RunStatus.FAILED
    assert state.reason == "timed out after 2s (its run timeout)"
    assert state.finished_at is not None
    took_s = (state.finished_at - state.created_at).total_seconds()
    assert 2 <= took_s < 2 + 2 * settings.dispatch.reconcile_interval_s + 1.0, took_s
    assert {n.status.value for n in state.nodes.values()} == {"cancelled"}
    with pytest.raises(RunFailedError, match="timed out after 2s"):
        run.result()
    kinds = [event.kind for event in run.events(follow=False)]
    assert "run.timed_out" in kinds and kinds[-1] == "run.failed"


def test_the_plan_s_timeout_applies_unless_submit_gives_one(client: Client, worker: object) -> None:
    plan = PlanBuilder()
    plan.function("a", "sleep", params={"seconds": 60})
    timed = plan.build().model_copy(update={"timeout_s": 1.0})
    assert client.submit(timed).wait(timeout=30).reason == "timed out after 1s (its run timeout)"
    quick = PlanBuilder()
    quick.function("a", "noop")
    slow_limit = quick.build().model_copy(update={"timeout_s": 0.001})
    assert client.submit(slow_limit, timeout_s=30).result(timeout=30) is None
    with pytest.raises(InputError, match="positive number of seconds"):
        client.submit(quick.build(), timeout_s=0)


def test_a_stopped_run_is_not_reopened_by_a_replay(client: Client, worker: object) -> None:
    plan = PlanBuilder()
    plan.function("broken", "fail")
    plan.function("slow", "sleep", params={"seconds": 60})
    timed_out = client.submit(plan.build(), timeout_s=2)
    cancelled = client.submit(plan.build())
    for run in (timed_out, cancelled):
        wait_until(lambda run=run: client.dlq.list(run_id=run.run_id), what="a dead letter")
    cancelled.cancel()
    timed_out.wait(timeout=30)
    [letter] = client.dlq.list(run_id=timed_out.run_id)
    with pytest.raises(DeadLetterError, match=r"its run was stopped \(timed out after 2s"):
        client.dlq.replay(letter.id)
    [letter] = client.dlq.list(run_id=cancelled.run_id)
    with pytest.raises(DeadLetterError, match="its run was cancelled"):
        client.dlq.replay(letter.id)
    for run in (timed_out, cancelled):
        assert client.status(run.run_id).nodes["slow"].status == "cancelled"


def test_the_reconciler_stops_a_run_past_its_deadline_and_lists_its_work(
    no_worker_settings: Settings,
) -> None:
    runtime = Runtime.from_settings(no_worker_settings)
    plan = Plan.model_validate(
        {"nodes": [{"id": n, "type": "function", "function": "noop"} for n in ("a", "b")]}
    )
    run_id = new_run_id()
    graph = validate_plan(plan, builtin_registry(), PlanLimits())
    runtime.store.create_run(run_id, graph, runtime.dispatch_for, extra={"timeout_ms": 200})
    runtime.machine.claim(run_id, "a", 1, lease_s=30, holder="h:1")

    def reconcile() -> ReconcilePass:
        return runtime.machine.reconcile_run(run_id, publish_grace_s=60, stranded_after_s=60)

    assert reconcile().timed_out is None
    found = wait_until(lambda: (result := reconcile()).timed_out and result, timeout=5)
    assert found.status == "failed" and found.timed_out is not None
    assert found.timed_out.running == ["a"]
    assert [(n.node_id, n.fence) for n in found.timed_out.queued] == [("b", 1)]
    state = runtime.store.read_state(run_id)
    assert state.reason == "timed out after 0.2s (its run timeout)"
    assert runtime.machine.complete(run_id, "a", 1, "null") is None  # a late result


@pytest.mark.subprocess
def test_the_cli_takes_a_run_timeout(
    settings: Settings, redis_client: object, worker: object, tmp_path: Path
) -> None:
    env = cli_env(settings, tmp_path / "data")
    plan_file = tmp_path / "slow.yaml"
    plan_file.write_text(
        "nodes:\n  - {id: nap, type: function, function: sleep, params: {seconds: 60}}\n"
    )
    refused = dagwright("run", str(plan_file), "--run-timeout", "-3", env=env)
    assert refused.returncode == 2
    assert one_error_line(refused) == (
        "the run timeout must be a positive number of seconds, at most 2592000, not -3.0"
    )
    result = dagwright("run", str(plan_file), "--run-timeout", "1", "--json", env=env)
    assert result.returncode == 1, result.stderr
    out = json_out(result)
    assert out["status"] == "failed" and out["reason"] == "timed out after 1s (its run timeout)"
    shown = dagwright("status", out["run_id"], env=env)
    assert "stopped: timed out after 1s (its run timeout)" in shown.stdout
