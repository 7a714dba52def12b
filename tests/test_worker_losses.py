"""Issue 31, with real Valkey and real worker processes: a node whose whole workers are
killed again and again (a host lost, an eviction) is not poison; it is delivered again
after a backoff that `status` shows. A node that kills its own process, or hits its hard
time limit, is still counted by the worker's surviving parent (tests/test_resilience.py
has the child that kills itself)."""

from __future__ import annotations

import time

import pytest

from dagwright import Client, PlanBuilder, RunHandle, RunStatus, Settings
from dagwright.keys import NODE_EXECUTE_TASK
from dagwright.models import Event, NodeStatus, NodeWait
from dagwright.tasks import build_app
from tests.support.functions import executions_key
from tests.support.processes import WorkerProcess, Workers
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

KILLS = 4  # past the default max_deliveries (3): this many lease expiries were poison
# Each wait on `lost` lasts at least 2 s: a status poll catches it even on a loaded machine.
BACKOFF_S = 2.0
BACKOFF_MAX_S = 4.0


def node_events(run: RunHandle, node: str) -> list[Event]:
    return [e for e in run.events(follow=False) if e.node == node]


def running_under(client: Client, run_id: str, node: str, worker: WorkerProcess) -> bool:
    """The node runs, held by a pool child of ``worker`` (not a claim of a dead one)."""
    holder = client.runtime.client.hget(client.runtime.keys.run_key(run_id, "holder"), node)
    if not holder:
        return False
    pid = int(holder.rpartition(":")[2])
    try:
        return pid == worker.pid or open(f"/proc/{pid}/stat").read().split()[3] == str(worker.pid)
    except OSError:
        return False


def lost_wait_of(client: Client, run_id: str, node: str) -> NodeWait | None:
    state = client.status(run_id).nodes[node]
    if state.status == NodeStatus.RETRY_WAIT and state.waiting and state.waiting.on == "lost":
        return state.waiting
    return None


def test_a_node_outlives_its_whole_workers_killed_again_and_again(
    subprocess_settings: Settings, workers: Workers
) -> None:
    settings = subprocess_settings.model_copy(
        update={"worker_loss_backoff_s": BACKOFF_S, "worker_loss_backoff_max_s": BACKOFF_MAX_S}
    )
    client = Client(settings)
    plan = PlanBuilder("preempted")
    plan.function("long", "count", params={"seconds": 4.0})
    run = client.submit(plan.build())
    seen_waits: list[NodeWait] = []
    worker = workers.start(settings, concurrency=1)
    for kill in range(KILLS):
        wait_until(
            lambda w=worker: running_under(client, run.run_id, "long", w),  # type: ignore[misc]
            timeout=90,
            what=f"the node running on worker {kill}",
        )
        worker.kill_all()  # the whole process group: no parent survives to see it
        # The next machine comes up (its reconciler finds the expired lease), and the node
        # waits to be delivered again.
        worker = workers.start(settings, concurrency=1)
        seen_waits.append(
            wait_until(
                lambda: lost_wait_of(client, run.run_id, "long"),
                timeout=90,  # a worker's start, the lease's expiry, a reconciler pass
                interval=0.02,
                what="the node waiting for re-delivery after its worker was lost",
            )
        )
    state = run.wait(timeout=120)
    assert state.status == RunStatus.SUCCEEDED, (state.error, workers.log_tails())
    assert client.runtime.client.hget(executions_key(run.run_id), "long") == "1"
    assert [wait.count for wait in seen_waits] == list(range(1, KILLS + 1))
    assert "worker was lost" in seen_waits[-1].describe()

    # Each loss waited its backoff (doubling up to the cap), and no longer than that and a
    # reconciler pass or two: a bounded delay, whatever the count of lost workers.
    events = node_events(run, "long")
    expired = [e.at for e in events if e.kind == "node.lease_expired"]
    requeued = [e.at for e in events if e.kind == "node.queued"][1:]  # after the first
    assert len(expired) == KILLS and len(requeued) == KILLS
    assert sum(e.kind == "node.running" for e in events) == KILLS + 1
    for loss, (lost_at, queued_at) in enumerate(zip(expired, requeued, strict=True)):
        backoff_s = min(BACKOFF_MAX_S, BACKOFF_S * 2**loss)
        waited_s = (queued_at - lost_at).total_seconds()
        assert (
            backoff_s - 0.05
            <= waited_s
            <= backoff_s + 4 * settings.dispatch.reconcile_interval_s + 2
        )
    assert not client.dlq.list(run_id=run.run_id)


def test_a_hard_time_limit_counts_as_the_node_killing_its_process(
    subprocess_settings: Settings, workers: Workers
) -> None:
    settings = subprocess_settings.model_copy(
        update={"max_deliveries": 1, "worker_loss_backoff_s": 0.2}
    )
    client = Client(settings)
    plan = PlanBuilder("hard-limit")
    plan.function("slow", "outlasts_its_soft_limit", params={"seconds": 30.0}, timeout_s=120)
    run = client.submit(plan.build())
    # Its message, sent again with time limits of 1 s and 3 s (a node's own are its timeout
    # and 5 s, 30 s: past dagwright's own timeout; here the pool's kill must come first).
    app = build_app(settings)
    queue = client.status(run.run_id).nodes["slow"]
    assert queue.status == NodeStatus.QUEUED
    with app.connection_for_write() as connection:
        purged = connection.default_channel.queue_purge("dw.function")
    assert purged == 1
    app.send_task(
        NODE_EXECUTE_TASK,
        args=[run.run_id, "slow", 1],
        queue="dw.function",
        soft_time_limit=1,
        time_limit=3,
    )
    started = time.monotonic()
    workers.start(settings, concurrency=1)
    state = run.wait(timeout=90)
    assert state.status == RunStatus.FAILED, workers.log_tails()
    [letter] = client.dlq.list(run_id=run.run_id)
    assert letter.classification == "poison" and letter.error_class == "PoisonMessageError"
    died = [e for e in node_events(run, "slow") if e.kind == "node.process_died"]
    assert len(died) == 1 and "hard time limit" in died[0].data["cause"]
    assert client.runtime.client.hget(executions_key(run.run_id), "slow") is None
    assert time.monotonic() - started < 60
