"""The ready backlog (orchestrator/execution/backlog.py, issue 31): per queue, the messages
waiting plus the nodes of pulled fan-outs waiting in their runs' pools, counted by the
scripts that change a pool (never a scan), exact under pull, cancel and run timeout,
repaired by the reconciler's recount, and served to KEDA at ``/backlog``; a 10,000-node
fan-out on two worker slots reads as some 10,000 ready nodes, not two messages."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from dagwright import Client, RunStatus, Settings
from dagwright.keys import QUEUE_PREFIX
from dagwright.metrics.backlog_endpoint import backlog_answer
from dagwright.metrics.readings import MetricsReader
from dagwright.metrics.server import bind_metrics_server
from dagwright.models import Plan
from dagwright.orchestrator.control.pulling import PullingSlots
from dagwright.orchestrator.execution.attempt import ExecutionEnv
from dagwright.orchestrator.execution.backlog import PooledRecount, read_pooled
from dagwright.orchestrator.runstate.machine import Claim, ReadyNode, RunOn
from dagwright.orchestrator.runstate.scripts import SETTLE_CHUNK
from dagwright.orchestrator.runtime import Runtime
from dagwright.registry import build_registry
from tests.support.processes import Workers
from tests.support.runstate import claim, finish, start
from tests.support.valkey import free_port
from tests.support.waiting import wait_until

QUEUE = f"{QUEUE_PREFIX}function"


def fan_out(width: int, **params: Any) -> list[dict[str, Any]]:
    """A root and ``width`` children of the built-in ``sleep`` (noop without ``params``)."""
    function = {"function": "sleep", "params": params} if params else {"function": "noop"}
    children = [{"id": f"c{i}", "depends_on": ["root"], **function} for i in range(width)]
    return [{"id": "root", "function": "noop"}, *children]


def readied(runtime: Runtime, run_id: str) -> list[ReadyNode]:
    """The root finished: its children queued (in the outbox), for the test to pool."""
    advance = finish(runtime, run_id, "root")
    assert advance is not None and not advance.settling
    return advance.ready


def pooled(runtime: Runtime) -> dict[str, int]:
    return read_pooled(
        runtime.client, runtime.keys, buckets=runtime.settings.dispatch.reconciler_buckets
    )


# -- the counter ------------------------------------------------------------------------


def test_the_pooled_count_follows_pools_pulls_and_a_cancel(worker_env: ExecutionEnv) -> None:
    runtime, machine = worker_env.runtime, worker_env.runtime.machine
    first, _ = start(runtime, fan_out(20))
    assert machine.pool(first, readied(runtime, first)[:15]) == 15
    assert pooled(runtime) == {QUEUE: 15}
    pulled = machine.pull(first, [QUEUE])
    assert len(pulled) == 1 and pooled(runtime) == {QUEUE: 14}
    assert machine.pool(first, pulled) == 1 and pooled(runtime) == {QUEUE: 15}
    assert machine.pool(first, pulled) == 0 and pooled(runtime) == {QUEUE: 15}  # once only
    assert len(machine.pull(first, [QUEUE])) == 1
    second, _ = start(runtime, fan_out(5))
    machine.pool(second, readied(runtime, second))
    assert pooled(runtime) == {QUEUE: 14 + 5}
    machine.cancel(first, "enough")
    assert pooled(runtime) == {QUEUE: 5}


def test_a_fan_out_released_in_chunks_counts_what_it_has_yet_to_release(
    worker_env: ExecutionEnv,
) -> None:
    """A 500-node fan-out readies a chunk of SETTLE_CHUNK at its root's success; the
    other 300 wait in the run's `settling`, ready as much as the pooled ones."""
    runtime, machine = worker_env.runtime, worker_env.runtime.machine
    run_id, _ = start(runtime, fan_out(500))
    assert isinstance(claim(runtime, run_id, "root"), Claim)
    advance = machine.complete(run_id, "root", 1, "null")
    assert advance is not None and advance.settling and len(advance.ready) == SETTLE_CHUNK
    assert pooled(runtime) == {QUEUE: 500 - SETTLE_CHUNK}
    machine.pool(run_id, advance.ready)
    assert pooled(runtime) == {QUEUE: 500}
    released = machine.settle(run_id)  # the next chunk goes to the outbox: no longer counted
    assert released is not None and len(released.ready) == SETTLE_CHUNK
    assert pooled(runtime) == {QUEUE: 500 - SETTLE_CHUNK}
    machine.cancel(run_id, "enough")
    assert pooled(runtime) == {}
    assert PooledRecount(runtime.client, runtime.keys).run().drift == {}


def pool_rows(runtime: Runtime, run_id: str) -> tuple[set[str], set[str], set[str]]:
    """The run's pooled nodes, its queued set and its outbox."""
    key = lambda name: runtime.keys.run_key(run_id, name)  # noqa: E731
    members = runtime.client.zrange(key("pool"), 0, -1)
    pooled_nodes = {str(member).rsplit("\t", 1)[-1] for member in members}
    queued = set(runtime.client.zrange(key("queued"), 0, -1))
    return pooled_nodes, queued, set(runtime.client.zrange(key("outbox"), 0, -1))


@pytest.mark.parametrize("runs_on", [False, True], ids=["pull", "completion-running-on"])
def test_a_chunk_released_into_the_pool_is_queued_out_of_the_outbox_and_counted_once(
    worker_env: ExecutionEnv, runs_on: bool
) -> None:
    """A pull that drains the pool releases the next chunk into it (prelude.lua
    refill_pool): its nodes are queued, each with its event, none in the outbox (pool.lua
    takes them out of it), and the pooled count moves by the chunk at once."""
    runtime, machine = worker_env.runtime, worker_env.runtime.machine
    run_id, _ = start(runtime, fan_out(2 * SETTLE_CHUNK + 50))
    assert isinstance(claim(runtime, run_id, "root"), Claim)
    first = machine.complete(run_id, "root", 1, "null")
    assert first is not None and first.settling and len(first.ready) == SETTLE_CHUNK
    kept, rest = first.ready[0], first.ready[1:]
    machine.pool(run_id, rest)
    for _ in rest[1:]:  # pull all but the last pooled node
        assert len(machine.pull(run_id, [QUEUE])) == 1
    (last,) = pool_rows(runtime, run_id)[0]
    assert isinstance(claim(runtime, run_id, kept.node_id), Claim)
    if runs_on:  # the completion pulls the last one for its worker, which runs it next
        on = RunOn("w:1", lease_s=30, max_time_limit_s=3600)
        advance = machine.complete(run_id, kept.node_id, 1, "null", pull_from=[QUEUE], run_on=on)
        assert advance is not None and advance.ready == []
        assert [kept.node_id for kept, _claim in advance.claimed] == [last]
    else:
        assert [node.node_id for node in machine.pull(run_id, [QUEUE])] == [last]
    # the pull drained the pool: the next chunk went into it in the same step
    pooled_nodes, queued, outbox = pool_rows(runtime, run_id)
    assert len(pooled_nodes) == SETTLE_CHUNK and last not in pooled_nodes
    assert pooled_nodes <= queued and not pooled_nodes & outbox
    states = runtime.store.read_state(run_id).nodes
    assert {states[node].status.value for node in pooled_nodes} == {"queued"}
    assert states[last].status.value == ("running" if runs_on else "queued")
    queued_events = [e.node for e in runtime.store.read_events(run_id) if e.kind == "node.queued"]
    assert sorted(queued_events) == sorted(set(queued_events))  # one event a node
    assert pooled_nodes <= set(queued_events)
    assert pooled(runtime) == {QUEUE: SETTLE_CHUNK + 50}  # and the last 50 to release
    assert PooledRecount(runtime.client, runtime.keys).run().drift == {}


def test_a_run_timeout_and_a_drained_pool_leave_nothing_counted(
    worker_env: ExecutionEnv, redis_client: redis.Redis
) -> None:
    runtime, machine = worker_env.runtime, worker_env.runtime.machine
    run_id, _ = start(runtime, fan_out(6))
    machine.pool(run_id, readied(runtime, run_id))
    while machine.pull(run_id, [QUEUE]):
        pass
    assert pooled(runtime) == {}  # a queue with none has no field
    other, _ = start(runtime, fan_out(6))
    machine.pool(other, readied(runtime, other))
    runtime.client.hset(runtime.keys.run_key(other, "run"), mapping={"timeout_ms": 1})
    found = machine.reconcile_run(other, publish_grace_s=60, stranded_after_s=60)
    assert found.timed_out is not None and found.status == RunStatus.FAILED.value
    assert pooled(runtime) == {}


def test_the_recount_repairs_a_drifted_counter(worker_env: ExecutionEnv) -> None:
    runtime, machine = worker_env.runtime, worker_env.runtime.machine
    run_id, _ = start(runtime, fan_out(8))
    machine.pool(run_id, readied(runtime, run_id))
    runtime.client.hset(runtime.keys.pooled_nodes, mapping={QUEUE: 3, f"{QUEUE_PREFIX}gone": 7})
    recount = PooledRecount(runtime.client, runtime.keys).run()
    assert recount.drift == {QUEUE: (3, 8), f"{QUEUE_PREFIX}gone": (7, 0)}
    assert pooled(runtime) == {QUEUE: 8}
    assert PooledRecount(runtime.client, runtime.keys).run().drift == {}


# -- what autoscaling reads ---------------------------------------------------------------


@pytest.fixture
def reader(no_worker_settings: Settings) -> Iterator[MetricsReader]:
    url = no_worker_settings.redis.url or ""
    broker = no_worker_settings.redis.broker_url or url
    yield MetricsReader(no_worker_settings, url, broker, build_registry(no_worker_settings))


def test_backlog_answers_each_queue_and_refuses_what_it_cannot_answer(
    worker_env: ExecutionEnv, reader: MetricsReader
) -> None:
    runtime = worker_env.runtime
    run_id, _ = start(runtime, fan_out(12))
    ready = readied(runtime, run_id)
    runtime.machine.pool(run_id, ready[2:])
    worker_env.broker.publish(ready[:2])
    status, body = backlog_answer(reader, f"queue={QUEUE}")
    assert status == "200 OK"
    assert body == {"queue": QUEUE, "ready": 12, "waiting": 2, "pooled": 10}
    status, every = backlog_answer(reader, "")
    assert every["queues"][QUEUE] == body and every["queues"][f"{QUEUE_PREFIX}coder"]["ready"] == 0
    status, problem = backlog_answer(reader, f"queue={QUEUE_PREFIX}typo")
    assert status.startswith("404") and "no worker type serves 'dw.typo'" in problem["detail"]
    assert backlog_answer(reader, "queue=" + "x" * 2000)[0].startswith("400")


def test_the_metrics_server_serves_the_backlog_and_the_gauges(
    worker_env: ExecutionEnv, no_worker_settings: Settings
) -> None:
    runtime = worker_env.runtime
    run_id, _ = start(runtime, fan_out(7))
    runtime.machine.pool(run_id, readied(runtime, run_id))
    server = bind_metrics_server(no_worker_settings, host="127.0.0.1", port=free_port())
    server.start()
    try:
        base = server.url.removesuffix("/metrics")
        with urllib.request.urlopen(f"{base}/backlog?queue={QUEUE}", timeout=10) as answer:
            assert json.load(answer)["ready"] == 7
        with urllib.request.urlopen(server.url, timeout=10) as answer:
            text = answer.read().decode()
        assert f'dagwright_queue_ready{{queue="{QUEUE}"}} 7.0' in text
        assert f'dagwright_queue_pooled{{queue="{QUEUE}"}} 7.0' in text
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(f"{base}/backlog?queue=nope", timeout=10)
    finally:
        server.stop()


# -- acceptance: a 10,000-node fan-out on two slots ---------------------------------------

WIDTH = 10_000


def test_a_ten_thousand_node_fan_out_on_two_slots_reads_as_its_backlog(
    subprocess_settings: Settings, workers: Workers
) -> None:
    """Issue 31's acceptance test, with a real worker of two slots: KEDA's number for the
    queue is at least 9,000 while the fan-out runs, where the Redis list holds about two
    messages; the cancel that ends it leaves nothing counted. Its nodes are short, so its
    pool is pulled all along: the reconciler never publishes it as an idle one."""
    settings = subprocess_settings.model_copy(update={"max_nodes": WIDTH + 1})
    worker = workers.start(settings, concurrency=2, args=("-t", "function"))
    client = Client(settings)
    wait_until(lambda: pulling_slots(client) == 2, timeout=60, what="the worker's two slots")
    plan = Plan.model_validate({"nodes": [
        {"type": "function", **node} for node in fan_out(WIDTH, seconds=0.5)
    ]})  # fmt: skip
    run = client.submit(plan)
    reader = MetricsReader(
        settings,
        settings.redis.url or "",
        settings.redis.broker_url or "",
        build_registry(settings),
    )

    def backlog() -> Any:
        return {b.queue: b for b in reader.backlogs()}[QUEUE]

    wait_until(lambda: backlog().ready >= 9_000, timeout=60, what="9,000 ready nodes")
    found = backlog()
    assert found.waiting is not None and found.waiting <= 2, found  # what the list alone shows
    assert found.pooled >= 9_000 - 2
    client.cancel(run.run_id)
    wait_until(lambda: backlog().pooled == 0, timeout=30, what="the pool uncounted")
    assert worker.process.poll() is None, worker.log_tail()


def pulling_slots(client: Client) -> int:
    return PullingSlots(client.runtime).of(QUEUE)
