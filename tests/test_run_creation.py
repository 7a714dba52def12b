"""Writing a run (issue 31: one primary serves everyone): a big run's columns are staged
in short commands, between which the server serves other clients, and the script that
makes the run its own is small; staged columns whose run never came expire. On the real
Valkey, read with MONITOR (what the server was sent) and TTL."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

from dagwright.models import NodeStatus, Plan
from dagwright.orchestrator.runstate.creation import (
    STAGED_CHUNK,
    STAGED_TTL_S,
    NewRun,
    create_call,
    index_run,
    stage_run,
)
from dagwright.orchestrator.runstate.store import new_run_id
from dagwright.orchestrator.runtime import Runtime
from dagwright.plans.validation import PlanLimits, validate_plan
from dagwright.settings import Settings
from dagwright.workers import builtin_registry
from tests.support.runstate import start

WIDTH = 1200  # a fan-out past two staged chunks of every column
STAGED_COLUMNS = (
    *("plan", "spec", "deps", "dependents", "remaining", "dispatch", "state", "fence"),
    "attempts",
)


@pytest.fixture
def runtime(no_worker_settings: Settings) -> Runtime:
    return Runtime.from_settings(no_worker_settings)


def fan_out(width: int) -> list[dict[str, Any]]:
    leaves = [{"id": f"n{i}", "depends_on": ["root"]} for i in range(width)]
    return [{"id": "root"}, *leaves, {"id": "join", "depends_on": [n["id"] for n in leaves]}]


def new_run(runtime: Runtime, nodes: list[dict[str, Any]]) -> NewRun:
    plan = Plan.model_validate(
        {"nodes": [{"type": "function", "function": "noop", **n} for n in nodes]}
    )
    graph = validate_plan(plan, builtin_registry(), PlanLimits(max_nodes=WIDTH + 2))
    return NewRun.of(graph, runtime.dispatch_for)


class Monitor:
    """What the server is sent meanwhile, command by command (MONITOR)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.commands: list[str] = []
        self.thread = threading.Thread(target=self._listen, daemon=True)

    def _listen(self) -> None:
        with self.client.monitor() as monitor:
            for sent in monitor.listen():
                self.commands.append(sent["command"])
                if "dw-monitor-end" in sent["command"]:
                    return

    def __enter__(self) -> Monitor:
        self.thread.start()
        deadline = time.monotonic() + 10
        while self.client.info("clients")["connected_clients"] < 2:  # MONITOR is on
            assert time.monotonic() < deadline, "MONITOR did not start"
            time.sleep(0.01)
        time.sleep(0.1)
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.echo("dw-monitor-end")
        self.thread.join(10)


def test_a_big_run_is_written_in_short_commands_and_its_columns_are_its_own(
    runtime: Runtime,
) -> None:
    with Monitor(runtime.client) as sent:
        run_id, roots = start(runtime, fan_out(WIDTH))
    assert roots == ["root"]
    writes = [c for c in sent.commands if run_id in c]
    scripts = [c for c in writes if c.startswith(("EVALSHA", "FCALL", "EVAL "))]
    # one script makes the run (sent again after a NOSCRIPT on a fresh server): given its
    # hash's fields and roots, not its columns
    assert scripts and all(len(script) < 4000 for script in scripts), scripts[0][:200]
    # staged before it, each column a chunk of fields at a time (the state column's values
    # have no spaces, which MONITOR's text does not quote)
    staged = writes[: writes.index(scripts[0])]
    state_key = runtime.keys.run_key(run_id, "state")
    state_writes = [c.split(" ") for c in staged if c.startswith(f"HSET {state_key} ")]
    assert [(len(words) - 2) // 2 for words in state_writes] == [500, 500, WIDTH + 2 - 1000]
    assert STAGED_CHUNK == 500
    # the run owns what was staged: nothing of it expires, every node is there
    client = runtime.client
    for name in STAGED_COLUMNS:
        assert client.ttl(runtime.keys.run_key(run_id, name)) == -1, name
    state = runtime.store.read_state(run_id)
    assert state is not None and len(state.nodes) == WIDTH + 2
    assert state.nodes["root"].status is NodeStatus.QUEUED
    assert state.nodes["n1199"].status is NodeStatus.PENDING


def test_staged_columns_whose_run_never_came_expire_and_a_run_without_them_is_not_written(
    runtime: Runtime,
) -> None:
    client, keys = runtime.client, runtime.keys
    staged_only, gone = new_run_id(), new_run_id()
    for run_id in (staged_only, gone):
        pipe = client.pipeline(transaction=False)
        index_run(pipe, keys, run_id)
        stage_run(pipe, keys, run_id, new_run(runtime, fan_out(3)))
        pipe.execute()
    # a submitter that died here leaves columns that expire, and no run
    for name in STAGED_COLUMNS:
        assert 0 < client.ttl(keys.run_key(staged_only, name)) <= STAGED_TTL_S, name
    assert not runtime.store.exists(staged_only)
    # columns gone before the run is written (their time ran out): the run is refused
    client.delete(keys.run_key(gone, "spec"))
    names, args = create_call(keys, gone, new_run(runtime, fan_out(3)), 100)
    script = runtime.store._create_run
    with pytest.raises(redis.ResponseError, match="staged columns are gone"):
        script(keys=names, args=args)
    assert not runtime.store.exists(gone)
