"""The run scripts as one function library on a real 3-primary Valkey Cluster (decision 119).

Loaded on every primary, each ``FCALL`` sent to the primary of the run's slot by
dagwright (cluster_routing.py), not routed by redis-py's ``COMMAND GETKEYS`` (two round
trips more a call); a primary that lost the library gets it again; MOVED is followed, a
call made while its slot migrates waits for the move (decision 122), and a primary's
death with its replica taking over; renewals and a reconciler's pass are a round trip to
each primary, and a dead primary fails only its own runs' calls; where an ACL refuses
functions the scripts go as EVALSHA, as on one server (tests/test_run_functions.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import redis
from pydantic import SecretStr

from dagwright.models import RunStatus
from dagwright.orchestrator.runstate.machine import LeaseRef, ReconcilePass, ReconcileTerms
from dagwright.orchestrator.runstate.scripts import run_library
from dagwright.orchestrator.runtime import Runtime
from dagwright.settings import Settings
from tests.support.acl_users import (
    NO_FUNCTIONS_PASSWORD,
    NO_FUNCTIONS_USER,
    add_user_refused_functions,
)
from tests.support.round_trips import counting_round_trips
from tests.support.runstate import claim, finish, start
from tests.support.valkey_cluster import ValkeyCluster, own_cluster, slot_range
from tests.support.waiting import wait_until


@pytest.fixture
def runtime(cluster_settings: Settings) -> Runtime:
    return Runtime.from_settings(cluster_settings)


def calls(cluster: ValkeyCluster, command: str) -> int:
    """``command``'s calls summed over the primaries since their last CONFIG RESETSTAT."""
    return sum(
        int(node.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))
        for node in cluster.node_clients()
    )


def reset_stats(cluster: ValkeyCluster) -> None:
    for node in cluster.node_clients():
        node.config_resetstat()


def primaries_with_the_library(cluster: ValkeyCluster) -> list[bool]:
    name = run_library().name
    return [
        bool(node.execute_command("FUNCTION", "LIST", "LIBRARYNAME", name))
        for node in cluster.node_clients()
    ]


def primary_of(runtime: Runtime, cluster: ValkeyCluster, run_id: str) -> redis.Redis:
    """A plain client of the primary that holds ``run_id``'s slot."""
    node = runtime.client.get_node_from_key(runtime.keys.run_key(run_id, "run"))
    return redis.Redis(port=node.port, decode_responses=True)


def test_a_node_is_claimed_and_completed_by_fcall_on_the_cluster_without_getkeys(
    runtime: Runtime, valkey_cluster: ValkeyCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One round trip a step, FCALL, to the run's primary: redis-py routing an FCALL
    itself asks a node COMMAND GETKEYS twice first."""
    run_id, _ = start(runtime, [{"id": "a"}, {"id": "b", "depends_on": ["a"]}])
    claim(runtime, run_id, "a")  # the library is loaded by now, on every primary
    assert primaries_with_the_library(valkey_cluster) == [True, True, True]
    reset_stats(valkey_cluster)
    with counting_round_trips(monkeypatch) as sent:
        runtime.machine.complete(run_id, "a", 1, "null")
    assert [trip for trip in sent if "FCALL" in trip or "COMMAND" in trip] == ["FCALL"], sent
    finish(runtime, run_id, "b")
    assert calls(valkey_cluster, "fcall") == 3 and calls(valkey_cluster, "evalsha") == 0
    assert calls(valkey_cluster, "command|getkeys") == 0
    assert runtime.store.run_status(run_id) == RunStatus.SUCCEEDED


def test_a_primary_that_lost_the_library_gets_it_again_and_the_run_completes(
    runtime: Runtime, valkey_cluster: ValkeyCluster
) -> None:
    run_id, _ = start(runtime, [{"id": "a"}, {"id": "b"}])
    claim(runtime, run_id, "a")
    primary = primary_of(runtime, valkey_cluster, run_id)
    primary.execute_command("FUNCTION", "FLUSH")  # as a restart without persistence would
    reset_stats(valkey_cluster)
    assert runtime.machine.complete(run_id, "a", 1, "null") is not None
    assert primaries_with_the_library(valkey_cluster) == [True, True, True]
    for node in valkey_cluster.node_clients():  # every primary, mid-run
        node.execute_command("FUNCTION", "FLUSH")
    finish(runtime, run_id, "b")
    assert runtime.store.run_status(run_id) == RunStatus.SUCCEEDED
    assert primaries_with_the_library(valkey_cluster) == [True, True, True]
    assert calls(valkey_cluster, "evalsha") == 0


def test_a_run_whose_slot_moved_to_another_primary_follows_it(
    runtime: Runtime, valkey_cluster: ValkeyCluster
) -> None:
    """The FCALL goes to the node dagwright named; that node answers MOVED, and redis-py
    sends it where the slot went (a resharding, or a failover's new primary)."""
    run_id, _ = start(runtime, [{"id": "a"}, {"id": "b", "depends_on": ["a"]}])
    claim(runtime, run_id, "a")
    slot, source, target = source_and_target(runtime, valkey_cluster, run_id)
    move_slot(slot, source, target)
    try:
        reset_stats(valkey_cluster)
        assert runtime.machine.complete(run_id, "a", 1, "null") is not None
        finish(runtime, run_id, "b")
        assert runtime.store.run_status(run_id) == RunStatus.SUCCEEDED
        assert int(target.info("commandstats")["cmdstat_fcall"]["calls"]) == 3
    finally:
        move_slot(slot, target, source)


def move_slot(slot: int, source: redis.Redis, target: redis.Redis) -> None:
    """Reshard ``slot`` from ``source`` to ``target``, keys and all (as valkey-cli does)."""
    begin_migration(slot, source, target)
    migrate_keys(slot, source, target)
    end_migration(slot, source, target)


def begin_migration(slot: int, source: redis.Redis, target: redis.Redis) -> None:
    """``slot`` MIGRATING on ``source``, IMPORTING on ``target``: a command whose keys have
    all left ``source`` is answered ASK, one with some left and some not TRYAGAIN."""
    target.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source.cluster("MYID"))
    source.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target.cluster("MYID"))


def migrate_keys(
    slot: int, source: redis.Redis, target: redis.Redis, *, at_most: int | None = None
) -> None:
    """MIGRATE ``slot``'s keys from ``source`` to ``target``: all, or ``at_most`` of them."""
    port = target.connection_pool.connection_kwargs["port"]
    count = 100 if at_most is None else at_most
    while keys := source.execute_command("CLUSTER", "GETKEYSINSLOT", slot, count):
        source.execute_command("MIGRATE", "127.0.0.1", port, "", 0, 5000, "KEYS", *keys)
        if at_most is not None:
            return


def end_migration(slot: int, source: redis.Redis, target: redis.Redis) -> None:
    target_id = target.cluster("MYID")
    for node in (target, source):
        node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)


def source_and_target(
    runtime: Runtime, cluster: ValkeyCluster, run_id: str
) -> tuple[int, redis.Redis, redis.Redis]:
    """``run_id``'s slot, the primary that holds it and another one."""
    slot = runtime.client.keyslot(runtime.keys.run_key(run_id, "run"))
    source = primary_of(runtime, cluster, run_id)
    port = source.connection_pool.connection_kwargs["port"]
    target = next(
        node
        for node in cluster.node_clients()
        if node.connection_pool.connection_kwargs["port"] != port
    )
    return slot, source, target


def test_calls_during_their_slot_s_migration_wait_for_it_and_go_where_it_went(
    runtime: Runtime, valkey_cluster: ValkeyCluster
) -> None:
    """Mid-reshard a run's keys are on two nodes, or all on the target while the slot is
    still the source's: a run script names all of its run's keys, some never created, so
    both nodes answer TRYAGAIN (the source ASK once none is left, and the target TRYAGAIN
    even after ASKING) until the slot has moved. redis-py gives up after half a second
    ("TTL exhausted"); dagwright's client waits (redis_cluster.py), and the calls go to
    the new primary once the migration ends, here a second later."""
    run_id, _ = start(runtime, [{"id": "a"}, {"id": "b", "depends_on": ["a"]}])
    claim(runtime, run_id, "a")
    slot, source, target = source_and_target(runtime, valkey_cluster, run_id)
    begin_migration(slot, source, target)
    migrate_keys(slot, source, target, at_most=3)  # some keys moved, most not
    finishing = threading.Timer(1.0, lambda: finish_migration(slot, source, target))
    finishing.start()
    try:
        reset_stats(valkey_cluster)
        assert runtime.machine.complete(run_id, "a", 1, "null") is not None
    finally:
        finishing.join()
    assert calls(valkey_cluster, "fcall") == 1  # the one that ran, on the target
    assert int(target.info("commandstats")["cmdstat_fcall"]["calls"]) == 1
    begin_migration(slot, target, source)  # and back, all the keys moved first
    migrate_keys(slot, target, source)
    finishing = threading.Timer(1.0, lambda: end_migration(slot, target, source))
    finishing.start()
    try:
        finish(runtime, run_id, "b")
    finally:
        finishing.join()
    assert runtime.store.run_status(run_id) == RunStatus.SUCCEEDED


def finish_migration(slot: int, source: redis.Redis, target: redis.Redis) -> None:
    migrate_keys(slot, source, target)
    end_migration(slot, source, target)


@pytest.fixture
def no_functions_runtime(
    valkey_cluster: ValkeyCluster, cluster_settings: Settings
) -> Iterator[Runtime]:
    """A runtime on the cluster whose ACL user (on every primary) may run scripts but not
    functions: the run scripts must still work, as EVALSHA."""
    for node in valkey_cluster.node_clients():
        add_user_refused_functions(node)
    try:
        access = cluster_settings.redis.model_copy(
            update={"username": NO_FUNCTIONS_USER, "password": SecretStr(NO_FUNCTIONS_PASSWORD)}
        )
        yield Runtime.from_settings(cluster_settings.model_copy(update={"redis": access}))
    finally:
        for node in valkey_cluster.node_clients():
            node.acl_deluser(NO_FUNCTIONS_USER)


def test_where_an_acl_refuses_functions_the_cluster_runs_the_scripts_as_evalsha(
    no_functions_runtime: Runtime, valkey_cluster: ValkeyCluster
) -> None:
    runtime = no_functions_runtime
    with pytest.raises(redis.exceptions.NoPermissionError):
        runtime.client.execute_command("FCALL", "anything", 1, "key")
    run_id, _ = start(runtime, [{"id": "a"}, {"id": "b", "depends_on": ["a"]}])
    reset_stats(valkey_cluster)
    finish(runtime, run_id, "a")
    claim(runtime, run_id, "b")
    assert runtime.machine.renew([LeaseRef(run_id, "b", 1)], 30) == [True]
    terms = ReconcileTerms(publish_grace_s=60, stranded_after_s=60)
    assert isinstance(runtime.machine.reconcile_runs([run_id], terms)[0], ReconcilePass)
    runtime.machine.complete(run_id, "b", 1, "null")
    assert runtime.store.run_status(run_id) == RunStatus.SUCCEEDED
    assert calls(valkey_cluster, "evalsha") >= 4 and calls(valkey_cluster, "fcall") == 0


@pytest.fixture
def failover_cluster() -> Iterator[ValkeyCluster]:
    """A cluster of this test's own (it kills a primary), its first primary replicated."""
    with own_cluster() as cluster:
        yield cluster


def run_on_primary(runtime: Runtime, index: int) -> str:
    """A run (a, then b) whose slot the ``index``-th primary serves (a third of runs do)."""
    low, high = slot_range(index)
    for _ in range(100):
        run_id, _ = start(runtime, [{"id": "a"}, {"id": "b", "depends_on": ["a"]}])
        if low <= runtime.client.keyslot(runtime.keys.run_key(run_id, "run")) <= high:
            return run_id
    raise AssertionError("no run of 100 landed on the primary")


def test_a_run_goes_on_after_its_primary_dies_and_its_replica_takes_over(
    failover_cluster: ValkeyCluster, cluster_settings: Settings
) -> None:
    """The FCALL sent to the dead primary fails to connect; redis-py re-reads the slot map
    and dagwright sends it again, to the promoted replica, which has the library (a
    primary's functions are replicated)."""
    replica = failover_cluster.add_replica(0)
    settings = cluster_settings.model_copy(update={"redis_url": failover_cluster.url})
    runtime = Runtime.from_settings(settings)
    run_id = run_on_primary(runtime, 0)
    claim(runtime, run_id, "a")
    primary = failover_cluster.node_clients()[0]
    assert primary.execute_command("WAIT", 1, 5000) == 1  # the replica has it all
    failover_cluster.kill_primary(0)
    replica.execute_command("CLUSTER", "FAILOVER", "TAKEOVER")
    replica_port = replica.connection_pool.connection_kwargs["port"]
    survivors = failover_cluster.node_clients()[1:]
    wait_until(
        lambda: all(serves_slot_zero(node) == replica_port for node in survivors),
        timeout=20,
        what="the survivors to see the replica serve the dead primary's slots",
    )
    assert runtime.machine.complete(run_id, "a", 1, "null") is not None
    finish(runtime, run_id, "b")
    assert runtime.store.run_status(run_id) == RunStatus.SUCCEEDED
    assert int(replica.info("commandstats")["cmdstat_fcall"]["calls"]) >= 3


def serves_slot_zero(node: redis.Redis) -> int | None:
    """The port of the primary ``node`` says serves slot 0."""
    for low, _high, primary, *_ in node.execute_command("CLUSTER", "SLOTS"):
        if int(low) == 0:
            return int(primary[1])
    return None


def runs_on_each_primary(runtime: Runtime) -> list[str]:
    """A run on each primary (roots a and b claimed), for a batch spanning them all."""
    found: dict[str, str] = {}
    for _ in range(100):
        run_id, _ = start(runtime, [{"id": "a"}, {"id": "b"}])
        node = runtime.client.get_node_from_key(runtime.keys.run_key(run_id, "run"))
        found.setdefault(node.name, run_id)
        if len(found) == 3:
            break
    for run_id in found.values():
        claim(runtime, run_id, "a")
        claim(runtime, run_id, "b")
    assert len(found) == 3, found
    return list(found.values())


def test_renewals_and_a_reconciler_pass_are_a_round_trip_to_each_primary(
    runtime: Runtime, valkey_cluster: ValkeyCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster pipeline of FCALLs, each named its node: one round trip to each primary
    holding some, no COMMAND GETKEYS (they were one call each on a cluster)."""
    run_ids = runs_on_each_primary(runtime)
    leases = [LeaseRef(run_id, node, 1) for run_id in run_ids for node in ("a", "b")]
    terms = ReconcileTerms(publish_grace_s=60, stranded_after_s=60)
    with counting_round_trips(monkeypatch) as sent:
        assert runtime.machine.renew(leases, 30) == [True] * 6
        passes = runtime.machine.reconcile_runs(run_ids, terms)
    assert all(isinstance(found, ReconcilePass) for found in passes), passes
    trips = [trip for trip in sent if "FCALL" in trip or "COMMAND" in trip]
    assert sorted(trips) == ["FCALL"] * 3 + ["FCALL+FCALL"] * 3, sent


def test_a_batch_that_finds_the_library_gone_loads_it_and_runs_again(
    runtime: Runtime, valkey_cluster: ValkeyCluster
) -> None:
    run_ids = runs_on_each_primary(runtime)
    leases = [LeaseRef(run_id, "a", 1) for run_id in run_ids]
    for node in valkey_cluster.node_clients():
        node.execute_command("FUNCTION", "FLUSH")
    assert runtime.machine.renew(leases, 30) == [True] * 3
    assert primaries_with_the_library(valkey_cluster) == [True, True, True]
    for node in valkey_cluster.node_clients()[1:]:
        node.execute_command("FUNCTION", "FLUSH")
    terms = ReconcileTerms(publish_grace_s=60, stranded_after_s=60)
    passes = runtime.machine.reconcile_runs(run_ids, terms)
    assert all(isinstance(found, ReconcilePass) for found in passes), passes
    assert primaries_with_the_library(valkey_cluster) == [True, True, True]


@pytest.fixture
def partial_cluster() -> Iterator[ValkeyCluster]:
    """A cluster of this test's own whose primaries serve their slots with one down."""
    with own_cluster(full_coverage=False) as cluster:
        yield cluster


def test_a_batch_with_a_primary_down_still_runs_the_calls_to_the_others(
    partial_cluster: ValkeyCluster, cluster_settings: Settings
) -> None:
    """The reconciler's pass over runs on every primary, one of them dead (no replica):
    the pipeline cannot reach it, so each call goes alone, and only the dead primary's
    run gets an error (as when they were one call each)."""
    settings = cluster_settings.model_copy(update={"redis_url": partial_cluster.url})
    runtime = Runtime.from_settings(settings)
    run_ids = runs_on_each_primary(runtime)
    low, high = slot_range(0)
    slots = [runtime.client.keyslot(runtime.keys.run_key(run_id, "run")) for run_id in run_ids]
    partial_cluster.kill_primary(0)
    terms = ReconcileTerms(publish_grace_s=60, stranded_after_s=60)
    passes = runtime.machine.reconcile_runs(run_ids, terms)
    failed = [isinstance(found, redis.RedisError) for found in passes]
    assert failed == [low <= slot <= high for slot in slots], passes
    assert sum(isinstance(found, ReconcilePass) for found in passes) == 2
