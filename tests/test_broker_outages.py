"""A worker lives through any number of Redis outages: it reconnects, never exits.

Regression: 2 of 10 restarts of the Valkey under a running worker made it exit with
``AttributeError: 'NoneType' object has no attribute 'hostname'``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kombu import Producer, Queue
from kombu.common import ignore_errors

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.models import Plan
from dagwright.settings import Settings
from dagwright.tasks import build_app
from dagwright.tasks.transport_guard import ClosedConnectionError, guard_transport_reads
from dagwright.testing import FakeAnthropicServer
from tests.support.processes import WorkerProcess, Workers
from tests.support.settings import make_settings
from tests.support.valkey import RestartableValkey
from tests.support.waiting import wait_until

RESTARTS = 6


def consumer_connection_with_an_unacked_message(settings: Settings, *, guarded: bool) -> Any:
    """A consumer's broker connection holding one delivered, unacknowledged message."""
    app = build_app(settings)
    connection = app.connection_for_read()
    if guarded:
        guard_transport_reads(connection, lambda exc: None)
    queue = Queue("dw.outage-test", routing_key="dw.outage-test")
    Producer(connection.default_channel).publish({}, routing_key=queue.name, declare=[queue])
    message = connection.default_channel.basic_get(queue.name, no_ack=False)
    assert message is not None
    return connection, message


def forget_transport(connection: Any) -> None:
    """Where Celery leaves a broken connection when collect() timed out on its dead
    socket: the transport forgotten (its ``client`` None), the channel still open."""
    connection._do_close_transport()


@pytest.mark.parametrize("guarded", [False, True])
def test_closing_a_broken_connection_with_an_unacked_message(
    no_worker_settings: Settings, guarded: bool
) -> None:
    """The traceback of the regression: Celery closes the broken connection with
    ``ignore_errors``, which lets anything but a connection error through; kombu's
    channel restores its unacked message with a pool rebuilt from the forgotten settings."""
    connection, message = consumer_connection_with_an_unacked_message(
        no_worker_settings, guarded=guarded
    )
    forget_transport(connection)
    if not guarded:  # kombu as it is: the worker's main process would exit
        with pytest.raises(AttributeError, match="hostname"):
            ignore_errors(connection, connection.close)
        return
    ignore_errors(connection, connection.close)
    with pytest.raises(ClosedConnectionError):  # a late ack: logged by Celery, not fatal
        message.ack()


def busy_plan(name: str) -> Plan:
    """Nodes that are running (and finishing) while Valkey goes away and comes back."""
    plan = PlanBuilder(name)
    for k in range(4):
        plan.function(f"n{k}", "count", params={"seconds": 0.5 + k})
    return plan.build()


def connections(worker: WorkerProcess) -> int:
    """How many times the worker's consumer has connected to the broker."""
    return worker.log_path.read_text(errors="replace").count("Connected to redis")


def wait_for_reconnect(worker: WorkerProcess, connected_before: int) -> None:
    wait_until(
        lambda: connections(worker) > connected_before or worker.process.poll() is not None,
        timeout=30,
        what="the worker reconnecting",
    )


@pytest.mark.slow
def test_a_task_running_through_an_outage_is_acknowledged_after_it_without_killing_the_worker(
    tmp_path: Path, fake_llm_server: FakeAnthropicServer, workers: Workers
) -> None:
    """The deterministic form of the regression: the node outlives the outage, so its
    message is acknowledged on the channel of the connection Celery closed meanwhile."""
    valkey = RestartableValkey(tmp_path / "valkey")
    try:
        settings = make_settings(
            valkey.server, fake_llm_server, tmp_path / "data", state_db=0, broker_db=1
        )
        worker = workers.start(settings, concurrency=1)
        client = Client(settings)
        plan = PlanBuilder("outlives the outage")
        plan.function("slow", "count", params={"seconds": 8.0})
        run = client.submit(plan.build())
        wait_until(lambda: run.status().counts.running, timeout=30, what="the node running")
        connected = connections(worker)
        valkey.restart(down_s=1.0)
        wait_for_reconnect(worker, connected)
        wait_until(
            lambda: (
                "Task dagwright.node.execute" in worker.log_tail(10)
                or worker.process.poll() is not None
            ),
            timeout=30,
            what="the node ending",
        )
        assert run.wait(timeout=60).status == RunStatus.SUCCEEDED, worker.log_tail(60)
        assert worker.process.poll() is None, worker.log_tail(60)
        assert "Unrecoverable" not in worker.log_path.read_text()
    finally:
        workers.stop_all()
        valkey.stop()


@pytest.mark.slow
def test_a_worker_reconnects_after_every_valkey_restart(
    tmp_path: Path, fake_llm_server: FakeAnthropicServer, workers: Workers
) -> None:
    valkey = RestartableValkey(tmp_path / "valkey")
    try:
        settings = make_settings(
            valkey.server, fake_llm_server, tmp_path / "data", state_db=0, broker_db=1
        )
        # The threads pool: where the crash showed most (at the 2nd to 4th restart of 10).
        worker = workers.start(settings, concurrency=4, pool="threads")
        client = Client(settings)
        runs = []
        for restart in range(RESTARTS):
            runs.append(client.submit(busy_plan(f"outage {restart}")))
            wait_until(lambda: runs[-1].status().counts.running, timeout=30, what="nodes running")
            connected = connections(worker)
            valkey.restart(down_s=0.5 + restart % 3)
            wait_for_reconnect(worker, connected)
            assert worker.process.poll() is None, worker.log_tail(60)
        for run in runs:
            assert run.wait(timeout=120).status == RunStatus.SUCCEEDED, worker.log_tail(60)
        assert worker.process.poll() is None, worker.log_tail(60)
    finally:
        workers.stop_all()
        valkey.stop()
