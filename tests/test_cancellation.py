"""Cancellation reaches the work: running nodes stop within about a second (sandboxed
programs killed), queued messages are revoked, nothing more starts, and the run never
resumes. Real Valkey, real workers, real sandboxes."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
import redis
from celery.worker import state as worker_state

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.keys import node_task_id
from dagwright.orchestrator.execution.leases import LeaseKeeper
from dagwright.orchestrator.runstate.machine import LeaseRef
from dagwright.orchestrator.runtime import Runtime
from dagwright.orchestrator.stop_signals import announce_stop
from dagwright.sandbox import Limits
from dagwright.testing import FakeAnthropicServer
from tests.support.functions import executions_key
from tests.support.llm_script import RESEARCHER, text, turn, write
from tests.support.processes import Workers
from tests.support.sandboxes import BACKENDS, marked_program, processes_marked, sandbox_or_skip
from tests.support.waiting import wait_until

# Renewals this slow cannot be what stops a node within seconds: the announcement must.
SLOW_RENEWALS: dict[str, Any] = {"heartbeat_interval_s": 20.0, "lease_s": 60.0}


def node_kinds(client: Client, run_id: str) -> list[tuple[str, str | None]]:
    return [(event.kind, event.node) for event in client.events(run_id, follow=False)]


def listening(client: redis.Redis, channel: str) -> bool:
    return bool(dict(client.pubsub_numsub(channel)).get(channel))


@pytest.mark.sandbox
@pytest.mark.parametrize("backend", BACKENDS)
def test_cancel_kills_a_long_sandboxed_program_and_nothing_after_it_starts(
    backend: str, subprocess_settings: Settings, workers: Workers
) -> None:
    sandbox_or_skip(backend)
    settings = subprocess_settings.model_copy(update={"sandbox_backend": backend, **SLOW_RENEWALS})
    workers.start(settings, concurrency=1)
    client = Client(settings)
    marker = f"dagwright-test-{uuid.uuid4().hex}"
    plan = PlanBuilder("cancel a long program")
    plan.python("long", marked_program(marker), timeout_s=300)
    plan.function("after", "count", depends_on=["long"])
    run = client.submit(plan.build())
    wait_until(lambda: processes_marked(marker), timeout=60, what="the program running")

    cancelled_at = time.monotonic()
    state = run.cancel()
    wait_until(lambda: not processes_marked(marker), timeout=15, what="the program killed")
    killed_after_s = time.monotonic() - cancelled_at
    print(f"\n{backend}: program gone {killed_after_s:.2f}s after the cancel")
    assert killed_after_s < 5, workers.log_tails()

    assert state.status == RunStatus.CANCELLED and state.reason == "cancelled by a user"
    assert {nid: n.status.value for nid, n in state.nodes.items()} == {
        "long": "cancelled",
        "after": "cancelled",
    }
    # The only worker slot is free at once: another run's node runs right away.
    other = PlanBuilder("next")
    other.function("next", "count")
    assert client.submit(other.build()).result(timeout=20) == "next", workers.log_tails()
    kinds = node_kinds(client, run.run_id)
    assert ("node.running", "after") not in kinds
    assert not client.runtime.client.hexists(executions_key(run.run_id), "after")
    assert client.status(run.run_id).status == RunStatus.CANCELLED  # the stale end changed nothing


def test_cancel_revokes_the_messages_of_queued_nodes_and_none_of_them_runs(
    broker_subprocess_settings: Settings, workers: Workers
) -> None:
    """On each broker: the revoke is a broadcast on the broker's control exchange."""
    settings = broker_subprocess_settings.model_copy(update=SLOW_RENEWALS)
    worker = workers.start(settings, concurrency=1)
    client = Client(settings)
    plan = PlanBuilder("a busy worker")
    for name in ("one", "two", "three", "four"):
        plan.function(name, "sleep", params={"seconds": 120})
    run = client.submit(plan.build())
    wait_until(lambda: client.counts(run.run_id)[1].running == 1, timeout=30, what="one running")
    queued = [
        node_task_id(run.run_id, nid, 1)
        for nid, node in client.status(run.run_id).nodes.items()
        if node.status == "queued"
    ]
    assert len(queued) == 3

    run.cancel()
    # The running node stops, and the worker takes the next messages: it drops them unrun.
    wait_until(
        lambda: all(
            f"Discarding revoked task: dagwright.node.execute[{task_id}]"
            in worker.log_path.read_text()
            for task_id in queued
        ),
        # Generous: with the other pytest-xdist process busy on the same two cores, the
        # stop, the revoke broadcast and three deliveries took more than 20 s once.
        timeout=60,
        what="the revoked messages dropped",
    )
    started = [node for kind, node in node_kinds(client, run.run_id) if kind == "node.running"]
    assert len(started) == 1
    assert "dropping stale message" not in worker.log_path.read_text()  # revoked, not claimed
    assert client.status(run.run_id).counts.cancelled == 4


def test_an_agent_stops_at_its_next_checkpoint_after_a_cancel(
    client: Client, worker: object, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        turn(RESEARCHER, 1, write("a.md")),
        turn(RESEARCHER, 3, write("b.md"), delay_s=3),  # in flight at the cancel
        turn(RESEARCHER, 5, text("done")),
    )
    plan = PlanBuilder()
    plan.agent("research", "researcher", "Write notes.")
    run = client.submit(plan.build())
    wait_until(lambda: len(fake_llm.requests) == 2, timeout=30, what="turn 2 in flight")
    run.cancel()
    wait_until(lambda: not active_nodes(run.run_id), timeout=20, what="the agent stopped")
    assert len(fake_llm.requests) == 2  # the answer came back; no further call was made
    workspace = client.runtime.client.hkeys(client.runtime.keys.run_key(run.run_id, "workspace"))
    assert workspace == ["a.md"]  # the tool call of the late answer never ran
    state = client.status(run.run_id)
    assert state.status == RunStatus.CANCELLED
    assert state.nodes["research"].usage.llm_calls == 1  # the late answer is not recorded


def active_nodes(run_id: str) -> list[Any]:
    """Tasks of ``run_id`` the in-process worker is executing now."""
    return [req for req in list(worker_state.active_requests) if run_id in str(req.args)]


def test_a_stop_announcement_stops_only_that_run_s_nodes_and_survives_a_reconnect(
    no_worker_settings: Settings,
) -> None:
    # Channels ignore the database: a prefix of its own keeps other listeners out of it.
    own = no_worker_settings.model_copy(update={"key_prefix": f"t{uuid.uuid4().hex[:8]}:"})
    runtime = Runtime.from_settings(own)
    keeper = LeaseKeeper(runtime.machine, lease_s=60, interval_s=60)
    channel = runtime.keys.stop_channel
    mine, other = LeaseRef("run-a", "n", 1), LeaseRef("run-b", "n", 1)
    stop_mine, stop_other = threading.Event(), threading.Event()
    try:
        with keeper.hold(mine, stop_mine), keeper.hold(other, stop_other):
            wait_until(lambda: listening(runtime.client, channel), what="the listener")
            killed = break_subscriptions(runtime.client)
            assert killed  # the listener's subscription was cut...
            # ...and it subscribes again on a new connection (redis-py may reconnect at once,
            # so "not listening" in between is not observable reliably).
            wait_until(
                lambda: (
                    listening(runtime.client, channel)
                    and not killed & pubsub_connections(runtime.client)
                ),
                what="a new subscription",
            )
            announced = time.monotonic()
            announce_stop(runtime.client, runtime.keys, "run-a")
            assert stop_mine.wait(5), "not stopped"
            assert time.monotonic() - announced < 1.0
            assert not stop_other.is_set()
    finally:
        keeper.close()


def pubsub_connections(client: redis.Redis) -> set[str]:
    """The ids of the pub/sub connections of this test's database (not the session
    worker's)."""
    db = client.connection_pool.connection_kwargs.get("db", 0)
    return {conn["id"] for conn in client.client_list(_type="pubsub") if int(conn["db"]) == db}


def break_subscriptions(client: redis.Redis) -> set[str]:
    """Kill the pub/sub connections of this test's database; their ids."""
    killed = pubsub_connections(client)
    for conn_id in killed:
        client.client_kill_filter(_id=conn_id)
    return killed


@pytest.mark.sandbox
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sandbox_kills_its_program_when_cancel_is_set(backend: str) -> None:
    sandbox = sandbox_or_skip(backend)
    cancel = threading.Event()
    started = time.monotonic()
    threading.Timer(1.0, cancel.set).start()
    result = sandbox.run(
        "import time\ntime.sleep(60)", limits=Limits(wall_time_s=30), cancel=cancel
    )
    # Stopped by the cancel (1 s after `started`), soon after it. The result's own
    # duration starts once the program is set up, later than `started`: bound it above only.
    assert 1.0 <= time.monotonic() - started < 3.0
    assert result.cancelled and not result.ok and not result.timed_out
    assert result.exit_code is None
    assert result.duration_s < 3.0
    assert "stopped" in result.describe_failure()
    done = threading.Event()
    done.set()  # set before the run: it is stopped at once
    quick = sandbox.run("import time\ntime.sleep(60)", limits=Limits(wall_time_s=30), cancel=done)
    assert quick.cancelled and quick.duration_s < 3.0
