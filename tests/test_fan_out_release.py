"""A big fan-out released in chunks (prelude.lua settle_dependents, settle.lua): a success
with more than SETTLE_CHUNK dependents counts and queues only a chunk of them in its step,
so other runs' commands run between chunks; the rest is released by settle.lua (the
worker, chunk after chunk) or by the reconciler when the worker died between chunks.
Every dependent is released exactly once, and a run that ends or is cancelled between
chunks leaves nothing to release."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dagwright import Client
from dagwright.models import RunStatus
from dagwright.orchestrator.execution.attempt import ExecutionEnv, Outcome, execute_node
from dagwright.orchestrator.execution.eager import EagerSlot
from dagwright.orchestrator.runstate.machine import ReadyNode
from dagwright.orchestrator.runstate.scripts import SETTLE_CHUNK
from dagwright.orchestrator.runtime import Runtime
from dagwright.settings import Settings
from tests.support.runstate import finish, start
from tests.support.workers_live import announce

WIDTH = 2 * SETTLE_CHUNK + SETTLE_CHUNK // 2  # three chunks: two full, one half


def fan_out(width: int = WIDTH) -> list[dict[str, Any]]:
    children = [{"id": f"c{i}", "depends_on": ["root"]} for i in range(width)]
    return [{"id": "root"}, *children, {"id": "join", "depends_on": [c["id"] for c in children]}]


def states(runtime: Runtime, run_id: str) -> dict[str, str]:
    return runtime.client.hgetall(runtime.keys.run_key(run_id, "state"))


def children_in(runtime: Runtime, run_id: str, state: str) -> set[str]:
    return {n for n, s in states(runtime, run_id).items() if n.startswith("c") and s == state}


def settling(runtime: Runtime, run_id: str) -> dict[str, str]:
    return runtime.client.hgetall(runtime.keys.run_key(run_id, "settling"))


def run_children(runtime: Runtime, run_id: str, ready: list[ReadyNode]) -> None:
    """Claim and complete each released child once (fence 1), then the join."""
    for node in ready:
        assert node.fence == 1, node
        finish(runtime, run_id, node.node_id)


def test_a_success_queues_one_chunk_of_its_dependents_and_settle_releases_the_rest(
    no_worker_settings: Settings,
) -> None:
    runtime = Client(no_worker_settings).runtime
    run_id, _ = start(runtime, fan_out())
    first = finish(runtime, run_id, "root")
    assert len(first.ready) == SETTLE_CHUNK and first.settling
    assert len(children_in(runtime, run_id, "pending")) == WIDTH - SETTLE_CHUNK
    released = [*first.ready]
    while True:
        step = runtime.machine.settle(run_id)
        assert step is not None and len(step.ready) <= SETTLE_CHUNK
        released += step.ready
        if not step.settling:
            break
    names = [node.node_id for node in released]
    assert sorted(names) == sorted(f"c{i}" for i in range(WIDTH))  # each once
    assert settling(runtime, run_id) == {}
    run_children(runtime, run_id, released)
    finish(runtime, run_id, "join")
    assert runtime.store.run_status(run_id) == RunStatus.SUCCEEDED


def test_dependents_made_final_by_a_chunk_settle_their_own_across_chunks_once(
    no_worker_settings: Settings,
) -> None:
    runtime = Client(no_worker_settings).runtime
    # each child waits for the root and for a handler that is skipped: the root's success
    # skips the child, which skips its grandchild (cascades inside a chunk's budget)
    children = [{"id": f"c{i}", "depends_on": ["root", "handler"]} for i in range(WIDTH)]
    grandchildren = [{"id": f"g{i}", "depends_on": [f"c{i}"]} for i in range(WIDTH)]
    handler = {"id": "handler", "depends_on": ["ok"], "run_if": "any_failed"}
    run_id, _ = start(runtime, [{"id": "root"}, {"id": "ok"}, handler, *children, *grandchildren])
    finish(runtime, run_id, "ok")
    assert finish(runtime, run_id, "root").settling
    for _ in range(2 * WIDTH):  # bounded: each step counts at least one
        step = runtime.machine.settle(run_id)
        if step is None or not step.settling:
            break
    assert settling(runtime, run_id) == {}
    final = states(runtime, run_id)
    assert {node for node, state in final.items() if state == "skipped"} == set(final) - {
        "root",
        "ok",
    }
    status, counts = runtime.store.counts(run_id)
    assert status.is_final  # each made final once: the counters add up to the nodes
    assert (counts.done, counts.skipped) == (len(final), len(final) - 2)


def test_a_release_cut_short_is_finished_by_the_reconciler_only_after_its_grace(
    no_worker_settings: Settings,
) -> None:
    runtime = Client(no_worker_settings).runtime
    machine = runtime.machine
    run_id, _ = start(runtime, fan_out())
    first = finish(runtime, run_id, "root")  # its worker dies here: settle is never called
    # while the worker may still be releasing, the reconciler leaves the rest alone
    found = machine.reconcile_run(run_id, publish_grace_s=60, stranded_after_s=60)
    assert found.requeued == [] and len(children_in(runtime, run_id, "pending")) > 0
    time.sleep(0.01)  # (the entry is stamped in server milliseconds)
    released = [*first.ready]
    for _ in range(WIDTH):  # bounded: each pass releases at least one
        if not settling(runtime, run_id):
            break
        found = machine.reconcile_run(
            run_id, publish_grace_s=0.001, stranded_after_s=60, limit=SETTLE_CHUNK
        )
        released += found.requeued
    assert sorted(node.node_id for node in released) == sorted(f"c{i}" for i in range(WIDTH))
    assert children_in(runtime, run_id, "pending") == set()
    run_children(runtime, run_id, released)
    finish(runtime, run_id, "join")
    assert runtime.store.run_status(run_id) == RunStatus.SUCCEEDED


def test_a_cancel_between_chunks_leaves_nothing_to_release(no_worker_settings: Settings) -> None:
    client = Client(no_worker_settings)
    runtime = client.runtime
    run_id, _ = start(runtime, fan_out())
    assert finish(runtime, run_id, "root").settling
    client.cancel(run_id)
    assert settling(runtime, run_id) == {}
    assert runtime.machine.settle(run_id) is None
    found = runtime.machine.reconcile_run(run_id, publish_grace_s=0, stranded_after_s=60)
    assert found.requeued == [] and found.unpublished == []
    assert children_in(runtime, run_id, "queued") == set()
    assert children_in(runtime, run_id, "pending") == set()


def long_slot() -> EagerSlot:
    return EagerSlot(frozenset({"dw.function"}), deadline=time.monotonic() + 24 * 3600)


def test_the_worker_releases_every_chunk_into_the_pool_or_a_message_once(
    worker_env: ExecutionEnv,
) -> None:
    runtime = worker_env.runtime
    run_id, _ = start(runtime, fan_out())
    slot = long_slot()
    slot.deadline = time.monotonic()  # the worker keeps nothing: the release is all we see
    assert execute_node(worker_env, run_id, "root", 1, slot) == Outcome.SUCCEEDED
    assert settling(runtime, run_id) == {}
    assert children_in(runtime, run_id, "queued") == {f"c{i}" for i in range(WIDTH)}


def test_workers_draining_the_pool_release_the_next_chunk_as_they_need_it(
    worker_env: ExecutionEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = worker_env.runtime
    announce(worker_env, "two-slots", slots=2, queue="dw.function")
    worker_env.fair = False  # the wake-up message waits: this worker would give way to it
    run_id, _ = start(runtime, fan_out())
    pooled: list[int] = []
    pool = runtime.machine.pool

    def counted(run: str, nodes: list[ReadyNode]) -> int:
        pooled.append(len(nodes))
        return pool(run, nodes)

    def never(run: str) -> None:
        raise AssertionError("pulled chunks are not released by the completing worker")

    monkeypatch.setattr(runtime.machine, "pool", counted)
    monkeypatch.setattr(runtime.machine, "settle", never)
    assert execute_node(worker_env, run_id, "root", 1, long_slot()) == Outcome.SUCCEEDED
    # the first chunk: one kept, one message for the other slot, the rest pooled by the
    # worker; each next chunk put in the pool by the pull that drained it, in its step
    assert pooled == [SETTLE_CHUNK - 2]
    assert settling(runtime, run_id) == {}
    woken = children_in(runtime, run_id, "queued")
    assert len(woken) == 1 and worker_env.broker.queue_depth("dw.function") == 1
    assert execute_node(worker_env, run_id, woken.pop(), 1, long_slot()) == Outcome.SUCCEEDED
    state = runtime.store.read_state(run_id)
    assert state.status == RunStatus.SUCCEEDED
    assert {node.attempts for node in state.nodes.values()} == {1}


KILLED_BETWEEN_CHUNKS = """
import os, signal, sys, time
from dagwright.orchestrator.execution.attempt import execute_node
from dagwright.orchestrator.execution.eager import EagerSlot
from dagwright.orchestrator.runstate.machine import RunStateMachine
from dagwright.tasks.app_factory import build_app
from dagwright.tasks.env import execution_env
from dagwright.settings import Settings


def killed(self, run_id):  # the worker dies between the first chunk and the next
    os.kill(os.getpid(), signal.SIGKILL)


RunStateMachine.settle = killed
env = execution_env(build_app(Settings()))
execute_node(env, sys.argv[1], "root", 1, EagerSlot(frozenset(), deadline=time.monotonic()))
"""


def test_a_worker_sigkilled_between_chunks_loses_nothing_and_runs_nothing_twice(
    no_worker_settings: Settings,
) -> None:
    client = Client(no_worker_settings)
    runtime = client.runtime
    run_id, _ = start(runtime, fan_out())
    environment = {**os.environ, **settings_env(no_worker_settings)}
    process = subprocess.run(
        [sys.executable, "-c", KILLED_BETWEEN_CHUNKS, run_id],
        env=environment,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert process.returncode == -signal.SIGKILL, process.stderr.decode()[-2000:]
    assert len(children_in(runtime, run_id, "queued")) == SETTLE_CHUNK  # its first chunk
    assert settling(runtime, run_id)
    time.sleep(0.01)
    released: list[ReadyNode] = []
    for _ in range(WIDTH):  # bounded: each pass releases at least one
        if not settling(runtime, run_id):
            break
        found = runtime.machine.reconcile_run(
            run_id, publish_grace_s=0.001, stranded_after_s=60, limit=SETTLE_CHUNK
        )
        released += found.requeued
    assert len(released) == WIDTH - SETTLE_CHUNK
    queued = children_in(runtime, run_id, "queued")
    assert queued == {f"c{i}" for i in range(WIDTH)}
    for node in sorted(queued):
        finish(runtime, run_id, node)  # fence 1: each released once
    finish(runtime, run_id, "join")
    assert runtime.store.run_status(run_id) == RunStatus.SUCCEEDED


def settings_env(settings: Settings) -> dict[str, str]:
    """The settings a subprocess needs to reach the test's databases."""
    return {
        "DAGWRIGHT_REDIS_URL": settings.redis.url or "",
        "DAGWRIGHT_BROKER_URL": settings.redis.broker_url or "",
        "DAGWRIGHT_DATA_DIR": str(Path(settings.process.data_dir)),
        "DAGWRIGHT_ANTHROPIC_BASE_URL": str(settings.llm.base_url or ""),
    }
