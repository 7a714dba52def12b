"""Runs through real workers outlive a primary's death on a real Valkey Cluster, its replica
elected by the other primaries on their own (no ``CLUSTER FAILOVER`` by anyone), and the
clients' commands wait the election out (dagwright/redis_cluster.py).

The cluster is this test's own, with a 1 s node timeout: the survivors count the killed
primary failed after it, and its replica wins the election a moment later. Until then the
cluster answers CLUSTERDOWN (full coverage) and the killed primary's slots refuse
connections: the workers' calls, the reconciler's passes and the client's waits meet
both. Replication is asynchronous, so the replica may lack the last writes the primary
acknowledged: a success recorded there can be lost, and its node runs again once its lease
runs out (the fence refuses the completion that comes back from the lost step). So the
runs must all succeed and every node succeed, not each node run once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from dagwright import Client, RunHandle, RunStatus, Settings
from dagwright.connection import connect, connect_async
from tests.support.processes import Workers
from tests.support.valkey_cluster import ValkeyCluster, own_cluster, slot_range
from tests.support.waiting import wait_until
from tests.test_resilience import completions, layered_plan

pytestmark = pytest.mark.slow

LAYERS, WIDTH = 4, 4
NODE_TIMEOUT_MS = 1000


@pytest.fixture
def electing_cluster() -> Iterator[ValkeyCluster]:
    """A cluster of this test's own (it kills a primary) that elects a replica by itself."""
    with own_cluster(node_timeout_ms=NODE_TIMEOUT_MS) as cluster:
        yield cluster


def on_first_primary(client: Client, run: RunHandle) -> bool:
    slot = client.runtime.client.keyslot(client.runtime.keys.run_key(run.run_id, "run"))
    low, high = slot_range(0)
    return low <= slot <= high


def test_runs_complete_through_an_automatic_failover_of_a_primary(
    electing_cluster: ValkeyCluster, cluster_settings: Settings, workers: Workers
) -> None:
    replica = electing_cluster.add_replica(0)
    settings = cluster_settings.model_copy(update={"redis_url": electing_cluster.seeds_url})
    workers.start(settings, concurrency=3)
    client = Client(settings)
    runs: list[RunHandle] = []
    while sum(on_first_primary(client, run) for run in runs) < 2 or len(runs) < 4:
        assert len(runs) < 40, "no two runs of 40 landed on the first primary"
        plan = layered_plan(f"failover {len(runs)}", layers=LAYERS, width=WIDTH)
        runs.append(client.submit(plan))
    wait_until(
        lambda: sum(completions(run).total() for run in runs) >= 8,
        timeout=60,
        what="the runs under way",
    )
    electing_cluster.kill_primary(0)  # the replica is elected, nobody asks it to take over
    for run in runs:
        state = run.wait(timeout=180)
        assert state.status == RunStatus.SUCCEEDED, workers.log_tails()
        assert set(completions(run)) == {f"l{i}n{k}" for i in range(LAYERS) for k in range(WIDTH)}
    assert replica.info("replication")["role"] == "master"


@pytest.fixture
def partial_cluster() -> Iterator[ValkeyCluster]:
    """A cluster of this test's own whose live primaries serve their slots while one is
    down (no replica: nothing is elected)."""
    with own_cluster(node_timeout_ms=NODE_TIMEOUT_MS, full_coverage=False) as cluster:
        yield cluster


def key_on_primary(client: object, index: int) -> str:
    low, high = slot_range(index)
    return next(
        key
        for key in (f"stream-{n}" for n in range(10_000))
        if low <= client.keyslot(key) <= high  # type: ignore[attr-defined]
    )


def test_a_command_whose_keys_a_dead_node_was_to_find_asks_another(
    partial_cluster: ValkeyCluster,
) -> None:
    """XREAD's keys move with its arguments: redis-py has a node find them (COMMAND
    GETKEYS), the sync client its default node, the asyncio client the node it started
    with, and keeps asking that one once it is dead. Ours ask another."""
    url = partial_cluster.seeds_url
    first = ("127.0.0.1", partial_cluster.ports[0])
    client = connect(url)
    client.set_default_node(client.get_node(*first))
    key = key_on_primary(client, 1)
    client.xadd(key, {"kind": "ready"})

    async def read_async_after(kill: object) -> object:
        async_client = connect_async(url)
        await async_client.initialize()  # type: ignore[attr-defined]
        async_client.commands_parser.node = async_client.get_node(*first)  # type: ignore[attr-defined]
        kill()  # type: ignore[operator]
        try:
            return await async_client.xread({key: "0"}, count=1, block=100)
        finally:
            await async_client.aclose()

    read_async = asyncio.run(read_async_after(lambda: partial_cluster.kill_primary(0)))
    assert [entry[1] for entry in read_async[0][1]] == [{"kind": "ready"}]  # type: ignore[index]
    read = client.xread({key: "0"}, count=1, block=100)
    assert [entry[1] for entry in read[0][1]] == [{"kind": "ready"}]
