"""Every script and every MULTI names the keys of one Redis Cluster slot (keys.py).

Checked by the slot each key hashes to (``redis.crc.key_slot``, Redis's CRC16 of the hash
tag), with no server: what a Cluster would refuse ("CROSSSLOT") fails here first. The
tests of tests/test_cluster.py run the same steps on a real 3-primary cluster.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pytest
from redis.crc import key_slot

from dagwright.connection import redact_url
from dagwright.errors import ConfigurationError
from dagwright.keys import Keys
from dagwright.orchestrator import runstate
from dagwright.orchestrator.execution.limits import Limit, NodeLimits
from dagwright.orchestrator.runstate.creation import CREATE_RUN_KEYS
from dagwright.orchestrator.runstate.machine import RunStateMachine
from dagwright.orchestrator.runstate.scripts import prelude
from dagwright.redis_endpoint import is_cluster_url, parse_cluster_url, url_credentials
from dagwright.telemetry.counters import NODE_DURATION

KEYS = Keys("dw:")
RUN = "01JCLUSTERRUN0000000000"


def slots(names: list[str]) -> set[int]:
    return {key_slot(name.encode()) for name in names}


def test_a_runs_keys_and_the_per_run_keys_beside_them_share_one_slot() -> None:
    per_run = [
        KEYS.run_scores(RUN),
        KEYS.run_logs(RUN),
        KEYS.webhook_log(RUN),
        KEYS.dlq_status(RUN, "1700000000000-0"),
        KEYS.memory_writes(RUN),
        KEYS.team_tasks(RUN),
        KEYS.run_followups(RUN),
        KEYS.run_pooled(RUN),
    ]
    assert len(slots([*KEYS.run_keys(RUN), *per_run])) == 1


def test_the_keys_of_create_run_replay_and_forget_share_the_runs_slot() -> None:
    create = [KEYS.run_key(RUN, name) for name in CREATE_RUN_KEYS]
    replay = [KEYS.dlq_status(RUN, "1-0"), KEYS.run_scores(RUN), KEYS.run_logs(RUN)]
    forget = [KEYS.webhook_log(RUN), KEYS.run_scores(RUN), KEYS.run_logs(RUN)]
    assert slots([*KEYS.run_keys(RUN), *create, *replay, *forget]) == slots(
        [KEYS.run_key(RUN, "run")]
    )


def test_different_runs_spread_over_the_slots() -> None:
    runs = [f"01JRUN{index:017d}" for index in range(300)]
    assert len(slots([KEYS.run_key(run, "run") for run in runs])) > 250


def test_the_dlq_status_of_a_dead_letter_is_in_its_runs_slot_not_a_global_one() -> None:
    assert slots([KEYS.dlq_status(RUN, "1-0")]) == slots([KEYS.run_key(RUN, "state")])
    assert slots([KEYS.dlq_status("other", "1-0")]) != slots([KEYS.dlq_status(RUN, "1-0")])


LIMIT_NAMES = ["type:agent", "type:coder", f"run:{RUN}", "key:customer=acme"]


def limit_keys(name: str) -> list[str]:
    return [KEYS.limit_holders(name), KEYS.limit_waiters(name), KEYS.limit_woken(name)]


def test_each_limits_keys_share_a_slot_of_their_own() -> None:
    """One slot per limit (a worker type's, a run's, a key's), not one for all: a Cluster
    spreads them over its primaries."""
    per_limit = [slots(limit_keys(name)) for name in LIMIT_NAMES]
    assert all(len(one) == 1 for one in per_limit)
    assert len(set().union(*per_limit)) == len(LIMIT_NAMES)
    assert slots([KEYS.limits]).isdisjoint(set().union(*per_limit))


def limits_like(*, cluster: bool) -> NodeLimits:
    """What ``NodeLimits``' key choices read, without a server."""
    limits = NodeLimits.__new__(NodeLimits)
    limits.keys, limits._cluster = KEYS, cluster
    return limits


def test_on_a_cluster_every_limits_step_names_the_keys_of_one_slot() -> None:
    """A node's run, type and key limits are a step each (the registry, another slot, is
    written by a step of its own); on one server one step takes them all, registry
    included."""
    limits = [Limit(name, 2) for name in LIMIT_NAMES]
    on_cluster, standalone = limits_like(cluster=True), limits_like(cluster=False)
    steps = on_cluster._each(limits)
    assert len(steps) == len(limits)
    for step in steps:
        named = on_cluster._keys(step)
        assert len(slots(named)) == 1 and KEYS.limits not in named
    assert standalone._each(limits) == [limits]
    assert standalone._keys(limits)[0] == KEYS.limits


def test_a_memory_writes_steps_on_a_cluster_name_one_slot_each() -> None:
    """check_node.lua (the run's slot), write_namespace.lua and read_namespace.lua (the
    namespace's); the index is a step of its own."""
    run_side = [
        KEYS.run_key(RUN, "state"),
        KEYS.run_key(RUN, "fence"),
        KEYS.memory_writes(RUN),
    ]
    namespace = [
        KEYS.memory_files("team"),
        KEYS.memory_meta("team"),
        KEYS.memory_writers("team"),
    ]
    assert slots(run_side) == slots([KEYS.run_key(RUN, "run")])
    assert len(slots(namespace)) == 1 and slots(namespace) != slots(run_side)
    assert slots([KEYS.memory_namespaces]).isdisjoint(slots(namespace) | slots(run_side))


def test_a_cluster_url_names_its_start_nodes_and_credentials() -> None:
    url = "redis+cluster://app:s3cret@10.0.0.1:7000,10.0.0.2:7001,[::1]"
    target = parse_cluster_url(url)
    assert is_cluster_url(url) and is_cluster_url("valkeys+cluster://h:1")
    assert not is_cluster_url("redis://h:6379/0")
    assert target.nodes == (("10.0.0.1", 7000), ("10.0.0.2", 7001), ("::1", 6379))
    assert (target.username, target.password, target.tls) == ("app", "s3cret", False)
    assert url_credentials(url) == ("app", "s3cret")
    assert parse_cluster_url("rediss+cluster://h:7000").tls
    assert "s3cret" not in redact_url(url)


@pytest.mark.parametrize(
    "url", ["redis+cluster://", "redis+cluster://h:7000/3", "redis+cluster://h:notaport"]
)
def test_a_bad_cluster_url_is_one_line_saying_how_to_write_it(url: str) -> None:
    with pytest.raises(ConfigurationError, match=r"redis\+cluster://\[user:password@\]host"):
        parse_cluster_url(url)


def machine_like(*, cluster: bool) -> SimpleNamespace:
    """What ``RunStateMachine``'s key choices read of the machine, without a server."""
    machine = SimpleNamespace(_cluster=cluster, keys=KEYS)
    machine._in_run_slot_or = partial(RunStateMachine._in_run_slot_or, machine)  # type: ignore[arg-type]
    return machine


def test_on_a_cluster_the_pooled_count_of_every_run_script_call_is_the_runs_own() -> None:
    """The pooled-nodes counter (prelude.lua POOLED) is global on one server: on a Cluster
    machine.py names the run's own count in its place, in the run's slot; the totals the
    reconcilers write are a key per bucket, each in the slot of its bucket's tag."""
    on_cluster, standalone = machine_like(cluster=True), machine_like(cluster=False)
    last = RunStateMachine._pooled_key(on_cluster, RUN)  # type: ignore[arg-type]
    assert last == KEYS.run_pooled(RUN) != KEYS.run_key(RUN, "run")
    assert slots([*KEYS.run_keys(RUN), last]) == slots([KEYS.run_key(RUN, "run")])
    assert RunStateMachine._pooled_key(standalone, RUN) == KEYS.pooled_nodes  # type: ignore[arg-type]
    assert "POOLED = nil" not in prelude()  # counted on a Cluster too
    assert slots([KEYS.pooled_bucket(3)]) == slots([KEYS.reconciler_bucket_lease(3)])


def test_compacts_keys_share_the_runs_slot() -> None:
    compact = [KEYS.run_logs(RUN), KEYS.run_scores(RUN)]
    assert slots([*KEYS.run_keys(RUN), *compact]) == slots([KEYS.run_key(RUN, "run")])


# The run scripts that name keys beyond the run's (SHARED), all in the run's slot on a
# Cluster. complete.lua's (the node-duration counters) is the run's hash there, counted
# by the caller after its step. age_out.lua names none since its dead letters moved to a
# step of their own (machine.py age_out).
SHARED_KEY_SCRIPTS = {
    "forget": True,
    "replay": True,
    "compact": True,
    "complete": True,
}


def test_on_a_cluster_complete_counts_durations_after_its_step() -> None:
    on_cluster, standalone = machine_like(cluster=True), machine_like(cluster=False)
    counters = KEYS.metrics(NODE_DURATION)
    assert RunStateMachine._in_run_slot_or(on_cluster, RUN, counters) == KEYS.run_key(RUN, "run")  # type: ignore[arg-type]
    assert RunStateMachine._in_run_slot_or(standalone, RUN, counters) == counters  # type: ignore[arg-type]


def test_the_run_scripts_naming_shared_keys_are_the_known_ones() -> None:
    lua = Path(runstate.__file__).parent / "lua"
    naming = {
        path.stem
        for path in lua.glob("*.lua")
        if path.stem != "prelude"
        and any("SHARED[" in line.split("--")[0] for line in path.read_text().splitlines())
    }
    assert naming == set(SHARED_KEY_SCRIPTS)
