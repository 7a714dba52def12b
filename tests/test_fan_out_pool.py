"""Pulled fan-outs (orchestrator/execution/pool.py): a big fan-out publishes a message per
pulling worker slot and leaves the other nodes in the run's pool, which the workers drain
as they finish nodes; nothing is lost when they die, a cancel empties the pool, and a
queue served by a worker that does not pull gets a message per node."""

from __future__ import annotations

import time
from typing import Any

import pytest
from celery.worker import state as worker_state

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.keys import NODE_EXECUTE_TASK, QUEUE_PREFIX
from dagwright.models import Plan
from dagwright.orchestrator.control.pulling import (
    POOL_ROOTS_PAST,
    PullingSlots,
    QueueBacklog,
    dispatch_roots,
    wake_or_pool,
)
from dagwright.orchestrator.execution import attempt
from dagwright.orchestrator.execution.attempt import ExecutionEnv, Outcome, execute_node
from dagwright.orchestrator.execution.eager import EagerSlot
from dagwright.orchestrator.execution.fairness import WaitingMessages
from dagwright.orchestrator.runstate.machine import Dispatch, LeaseRef, ReadyNode, RunOn, Success
from dagwright.orchestrator.runstate.store import new_run_id
from dagwright.orchestrator.runtime import Runtime
from dagwright.plans.validation import PlanLimits, validate_plan
from dagwright.settings import Settings
from dagwright.tasks.env import execution_env
from dagwright.telemetry.counters import NodeDuration
from dagwright.workers import builtin_registry
from tests.support.round_trips import counting_round_trips
from tests.support.runstate import RecordingBroker, start
from tests.support.waiting import wait_until
from tests.support.workers_live import announce as live_worker

QUEUE = f"{QUEUE_PREFIX}function"
OTHER_QUEUE = f"{QUEUE_PREFIX}coder"
DIAMOND = [
    {"id": "a"},
    {"id": "b", "depends_on": ["a"]},
    {"id": "c", "depends_on": ["a"]},
    {"id": "d", "depends_on": ["b", "c"]},
]


def ready(node_id: str, queue: str = QUEUE) -> ReadyNode:
    return ReadyNode("run", node_id, 1, Dispatch(queue=queue, time_limit_s=60))


def ids(nodes: list[ReadyNode]) -> list[str]:
    return [node.node_id for node in nodes]


# -- what is published and what is pooled ------------------------------------------


def test_a_fan_out_wakes_each_pulling_slot_but_the_busy_one_and_pools_the_rest() -> None:
    nodes = [ready(f"n{i}") for i in range(10)]
    publish, pool = wake_or_pool(nodes[1:], {QUEUE: 3}.get, kept=nodes[0])
    assert ids(publish) == ["n1", "n2"]  # three slots, one of them this worker's
    assert ids(pool) == [f"n{i}" for i in range(3, 10)]


def test_without_pulling_slots_or_beyond_a_small_fan_out_every_node_is_published() -> None:
    nodes = [ready("a"), ready("b"), ready("c", OTHER_QUEUE)]
    slots = {QUEUE: 0, OTHER_QUEUE: 4}.get
    assert wake_or_pool(nodes, slots, kept=None) == (nodes, [])
    few = [ready("a"), ready("b")]
    assert wake_or_pool(few, {QUEUE: 2}.get, kept=None) == (few, [])


def test_each_queue_is_split_on_its_own() -> None:
    nodes = [ready("a"), ready("b"), ready("x", OTHER_QUEUE), ready("y", OTHER_QUEUE)]
    publish, pool = wake_or_pool(nodes, {QUEUE: 1, OTHER_QUEUE: 1}.get, kept=ready("k"))
    assert ids(publish) == ["x"]  # QUEUE's only slot is this worker's, busy with k
    assert ids(pool) == ["a", "b", "y"]


# -- who pulls ------------------------------------------------------------------------


def announce(
    worker_env: ExecutionEnv, name: str, *, slots: int, pulls: bool = True, queue: str = QUEUE
) -> None:
    """A live worker of ``QUEUE`` (unless told another), as its presence step writes it."""
    live_worker(worker_env, name, slots=slots, queue=queue, pulls=pulls)


def test_the_slots_of_a_queue_are_those_of_its_live_pulling_workers(
    worker_env: ExecutionEnv,
) -> None:
    announce(worker_env, "a", slots=2)
    announce(worker_env, "b", slots=3)
    announce(worker_env, "c", slots=8, queue=OTHER_QUEUE)
    assert PullingSlots(worker_env.runtime).of(QUEUE) == 5
    announce(worker_env, "d", slots=1, pulls=False)  # it would never take its share of a pool
    assert PullingSlots(worker_env.runtime).of(QUEUE) == 0
    assert PullingSlots(worker_env.runtime).of(f"{QUEUE_PREFIX}writer") == 0  # nobody serves it


# -- the pool in a run ----------------------------------------------------------------


def long_slot() -> EagerSlot:
    return EagerSlot(frozenset({QUEUE}), deadline=time.monotonic() + 24 * 3600)


def fan_out(width: int, function: str = "noop") -> list[dict[str, Any]]:
    children = [{"id": f"c{i}", "depends_on": ["root"], "function": function} for i in range(width)]
    join = {"id": "join", "depends_on": [c["id"] for c in children], "run_if": "all_done"}
    return [{"id": "root"}, *children, join]


def pool_members(worker_env: ExecutionEnv, run_id: str) -> list[str]:
    key = worker_env.runtime.keys.run_key(run_id, "pool")
    return [str(member) for member in worker_env.runtime.client.zrange(key, 0, -1)]


def test_a_worker_drains_the_pool_at_one_round_trip_a_node_and_wakes_the_other_slot(
    worker_env: ExecutionEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    announce(worker_env, "two-slots", slots=2)
    warm_up, _ = start(worker_env.runtime, fan_out(3))  # the scripts loaded, the slots read
    assert execute_node(worker_env, warm_up, "root", 1, long_slot()) == Outcome.SUCCEEDED
    purge(worker_env)  # the warm-up's message: a message waiting would keep the other slot busy
    worker_env.backlog = QueueBacklog(
        worker_env.broker
    )  # (and its reading of the queue is forgotten)
    # The wake-up message waits, as no worker here takes it: with fairness on, this worker
    # would give its turn to it (tests/test_fairness.py).
    worker_env.fair = False
    run_id, _ = start(worker_env.runtime, fan_out(10))
    with counting_round_trips(monkeypatch) as sent:
        assert execute_node(worker_env, run_id, "root", 1, long_slot()) == Outcome.SUCCEEDED
    # one message, for the other slot; this worker ran every other child and the pool is empty
    assert worker_env.broker.queue_depth(QUEUE) == 1
    assert pool_members(worker_env, run_id) == []
    states = worker_env.runtime.store.read_state(run_id).nodes
    waiting = [node_id for node_id, node in states.items() if node.status.value == "queued"]
    assert len(waiting) == 1
    # the root: claim, complete (which claims the child this worker runs next), the
    # queue's backlog (kombu: whether the queue exists, and if so its length), pool,
    # publish, confirm; each of the 9 children this worker runs: a complete that pulls the
    # next and claims it
    tail = ["FCALL", "LPUSH+PUBLISH", "ZREM"] + ["FCALL"] * 9
    backlog = sent[2 : -len(tail)]
    assert sent[:2] == ["FCALL"] * 2 and sent[-len(tail) :] == tail, sent
    assert 1 <= len(backlog) <= 2 and "FCALL" not in backlog, sent
    # the woken slot runs its node; its success readies the join, run at once
    assert execute_node(worker_env, run_id, waiting[0], 1, long_slot()) == Outcome.SUCCEEDED
    assert worker_env.runtime.store.run_status(run_id) == RunStatus.SUCCEEDED


def only_the_root_runs(monkeypatch: pytest.MonkeyPatch, then: BaseException | None = None) -> None:
    """This worker runs the root and nothing after it: the node it keeps is left as its
    claim left it, then ``then`` is raised (a death) or the attempt ends as stale."""
    attempt_node = attempt.attempt_node

    def runs_only_the_root(env: ExecutionEnv, run: str, node: str, *args: Any) -> Any:
        if node == "root":
            return attempt_node(env, run, node, *args)
        if then is not None:
            raise then
        return Outcome.STALE

    monkeypatch.setattr(attempt, "attempt_node", runs_only_the_root)


def purge(worker_env: ExecutionEnv) -> None:
    """Drop the messages waiting in the test's queue."""
    with worker_env.broker.app.connection_or_acquire() as connection:  # type: ignore[attr-defined]
        connection.default_channel.queue_purge(QUEUE)


def test_when_messages_wait_for_every_slot_the_worker_runs_the_branches_itself(
    worker_env: ExecutionEnv,
) -> None:
    announce(worker_env, "two-slots", slots=2)
    other_run, _ = start(worker_env.runtime, [{"id": "x"}])
    worker_env.broker.publish(
        [ReadyNode(other_run, "x", 1, Dispatch(queue=QUEUE, time_limit_s=60))]
    )
    run_id, _ = start(worker_env.runtime, DIAMOND)
    worker_env.fair = False  # with fairness, this worker gives way to x (test_fairness.py)
    # b is kept; the other slot has a message to run first: c is pooled, not published,
    # and this worker pulls it after b, then runs d
    assert execute_node(worker_env, run_id, "a", 1, long_slot()) == Outcome.SUCCEEDED
    assert worker_env.runtime.store.run_status(run_id) == RunStatus.SUCCEEDED
    assert worker_env.broker.queue_depth(QUEUE) == 1  # only the other run's message


def test_in_a_burst_a_node_waking_another_slot_stays_within_four_round_trips(
    worker_env: ExecutionEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    announce(worker_env, "two-slots", slots=2)
    warm_up, _ = start(worker_env.runtime, DIAMOND)
    assert execute_node(worker_env, warm_up, "a", 1, long_slot()) == Outcome.SUCCEEDED
    purge(worker_env)
    worker_env.backlog = QueueBacklog(worker_env.broker, clock=lambda: 0.0)  # one reading, reused
    assert worker_env.backlog.of(QUEUE) == 0
    # so is fairness's look at the messages waiting (fairness.py)
    worker_env.waiting = WaitingMessages(worker_env.broker, clock=lambda: 0.0)
    assert worker_env.waiting.runs_in(frozenset({QUEUE})) == {}
    run_id, _ = start(worker_env.runtime, DIAMOND)
    with counting_round_trips(monkeypatch) as sent:
        assert execute_node(worker_env, run_id, "a", 1, long_slot()) == Outcome.SUCCEEDED
    # a: claim, complete (which claims b, kept), c's message (the other slot is idle: the
    # backlog read a moment ago is reused), confirm; then b: complete
    assert sent == ["FCALL", "FCALL", "LPUSH+PUBLISH", "ZREM", "FCALL"], sent


def test_a_pooled_fan_out_whose_nodes_fail_keeps_its_worker_pulling(
    worker_env: ExecutionEnv,
) -> None:
    announce(worker_env, "one-slot", slots=1)
    run_id, _ = start(worker_env.runtime, fan_out(6, function="fail"))
    assert execute_node(worker_env, run_id, "root", 1, long_slot()) == Outcome.SUCCEEDED
    state = worker_env.runtime.store.read_state(run_id)
    assert (
        sorted(n.status.value for k, n in state.nodes.items() if k.startswith("c"))
        == ["failed"] * 6
    )
    # no child had a message (the only slot was this worker's); the join, readied by the
    # last failure, has one, and runs after them (all_done)
    assert worker_env.broker.queue_depth(QUEUE) == 1
    assert execute_node(worker_env, run_id, "join", 1, long_slot()) == Outcome.SUCCEEDED
    assert worker_env.runtime.store.run_status(run_id) == RunStatus.FAILED


def test_a_pool_whose_workers_died_is_published_by_the_reconciler(
    worker_env: ExecutionEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    announce(worker_env, "two-slots", slots=2)
    run_id, _ = start(worker_env.runtime, fan_out(6))
    only_the_root_runs(monkeypatch, then=SystemExit("killed"))
    with pytest.raises(SystemExit):
        execute_node(worker_env, run_id, "root", 1, long_slot())
    pooled = [member.split("\t")[-1] for member in pool_members(worker_env, run_id)]
    # six children: one kept (claimed with the root's success: it has a lease, which its
    # worker's death lets run out, tests/test_eager.py), one published, four pooled
    assert len(pooled) == 4
    machine = worker_env.runtime.machine
    # its queue empty and the nodes old: still, pooled nodes are not "stranded"
    time.sleep(0.01)  # (the pool and the outbox are scored in server milliseconds)
    found = machine.reconcile_run(
        run_id, publish_grace_s=60, stranded_after_s=0.001, empty_queues=[QUEUE]
    )
    assert not set(pooled) & {node.node_id for node in found.stranded}
    # nobody pulled for the grace: the pool is published
    found = machine.reconcile_run(run_id, publish_grace_s=0.001, stranded_after_s=60)
    assert sorted(node.node_id for node in found.unpublished) == sorted(pooled)
    assert pool_members(worker_env, run_id) == []


def test_a_cancel_empties_the_pool(
    worker_env: ExecutionEnv, client_for_env: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    announce(worker_env, "one-slot", slots=1)
    run_id, _ = start(worker_env.runtime, fan_out(5))
    only_the_root_runs(monkeypatch)
    execute_node(worker_env, run_id, "root", 1, long_slot())
    assert len(pool_members(worker_env, run_id)) == 4  # five children: one kept, no other slot
    client_for_env.cancel(run_id)
    assert pool_members(worker_env, run_id) == []
    assert worker_env.runtime.store.run_status(run_id) == RunStatus.CANCELLED


@pytest.fixture
def client_for_env(no_worker_settings: Settings) -> Client:
    return Client(no_worker_settings)


def test_a_queue_served_by_a_worker_that_does_not_pull_gets_a_message_per_node(
    worker_env: ExecutionEnv,
) -> None:
    announce(worker_env, "puller", slots=4)
    announce(worker_env, "old", slots=4, pulls=False)
    run_id, _ = start(worker_env.runtime, fan_out(10))
    slot = long_slot()
    slot.deadline = time.monotonic()  # this worker keeps nothing either
    assert execute_node(worker_env, run_id, "root", 1, slot) == Outcome.SUCCEEDED
    assert worker_env.broker.queue_depth(QUEUE) == 10
    assert pool_members(worker_env, run_id) == []


def new_run(runtime: Runtime, width: int) -> tuple[str, list[ReadyNode]]:
    """A run of ``width`` independent nodes, written (its roots queued, none published)."""
    plan = Plan.model_validate(
        {"nodes": [{"id": f"n{i}", "type": "function", "function": "noop"} for i in range(width)]}
    )
    run_id = new_run_id()
    graph = validate_plan(plan, builtin_registry(), PlanLimits())
    return run_id, runtime.store.create_run(run_id, graph, runtime.dispatch_for)


def test_a_new_run_s_many_roots_wake_the_idle_slots_and_the_rest_are_pooled(
    worker_env: ExecutionEnv,
) -> None:
    announce(worker_env, "three-slots", slots=3)
    runtime, broker = worker_env.runtime, RecordingBroker()
    run_id, roots = new_run(runtime, 1200)  # past a chunk of pooling
    dispatch_roots(runtime, broker, run_id, roots)  # type: ignore[arg-type]
    assert len(broker.published) == 3
    assert len(pool_members(worker_env, run_id)) == 1197
    assert runtime.client.zcard(runtime.keys.run_key(run_id, "outbox")) == 0  # all dispatched
    # counted where autoscaling and `doctor` read a queue's backlog
    assert runtime.client.hget(runtime.keys.pooled_nodes, QUEUE) == "1197"


def test_a_few_roots_get_a_message_each_whoever_pulls(worker_env: ExecutionEnv) -> None:
    announce(worker_env, "three-slots", slots=3)
    runtime, broker = worker_env.runtime, RecordingBroker()
    run_id, roots = new_run(runtime, POOL_ROOTS_PAST)
    dispatch_roots(runtime, broker, run_id, roots)  # type: ignore[arg-type]
    assert len(broker.published) == POOL_ROOTS_PAST
    assert pool_members(worker_env, run_id) == []


# -- on a real worker -----------------------------------------------------------------


def test_a_wide_fan_out_runs_on_a_few_messages(worker: Any, client: Client) -> None:
    # the worker's presence (its slots) is written every few seconds: the test's set-up
    # emptied the database after the worker's first
    wait_until(lambda: PullingSlots(client.runtime).of(QUEUE) == 4, timeout=15, what="its slots")
    # and the worker's own reading says so too: it reuses a reading for a few seconds, and
    # one taken while the database was empty sees no pulling slot, so that every node of
    # the fan-out would get its message
    pulling = execution_env(worker.app).pulling
    wait_until(lambda: pulling.of(QUEUE) == 4, timeout=15, what="the worker's reading")
    plan = PlanBuilder("wide")
    plan.function("root", "noop")
    children = [plan.function(f"c{i}", "noop", depends_on=["root"]) for i in range(40)]
    plan.function("join", "noop", depends_on=children)
    before = worker_state.total_count[NODE_EXECUTE_TASK]
    state = client.submit(plan.build()).wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED
    # the root's message and one per other slot of the worker (4 threads); a reconciler
    # pass finding the pool idle under a slow machine may publish a few more
    assert worker_state.total_count[NODE_EXECUTE_TASK] - before <= 10


def test_a_run_of_many_roots_runs_on_a_few_messages(worker: Any, client: Client) -> None:
    """A plan of independent nodes: its roots are split as a fan-out's release is (a
    message per idle pulling slot, the rest pooled), not a message each."""
    wait_until(lambda: PullingSlots(client.runtime).of(QUEUE) == 4, timeout=15, what="its slots")
    plan = PlanBuilder("flat")
    for i in range(60):
        plan.function(f"n{i}", "noop")
    before = worker_state.total_count[NODE_EXECUTE_TASK]
    state = client.submit(plan.build()).wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED
    assert all(node.attempts == 1 for node in state.nodes.values())
    # one message per slot of the worker (4 threads); a reconciler pass finding the pool
    # idle under a slow machine may publish a few more
    assert worker_state.total_count[NODE_EXECUTE_TASK] - before <= 10


# -- batches of a fan-out's quick nodes (decision 124) ----------------------------------


def batching_slot(max_batch: int) -> EagerSlot:
    """A slot whose batches are always full: a window no pace of a no-op reaches."""
    return EagerSlot(
        frozenset({QUEUE}), deadline=time.monotonic() + 24 * 3600, window_s=60, max_batch=max_batch
    )


def test_a_worker_records_a_fan_out_s_quick_nodes_in_batches_one_step_each(
    worker_env: ExecutionEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    announce(worker_env, "one-slot", slots=1)  # this worker's: every child is pooled
    warm_up, _ = start(worker_env.runtime, fan_out(3))
    assert execute_node(worker_env, warm_up, "root", 1, batching_slot(4)) == Outcome.SUCCEEDED
    worker_env.fair = False
    run_id, _ = start(worker_env.runtime, fan_out(13))
    with counting_round_trips(monkeypatch) as sent:
        assert execute_node(worker_env, run_id, "root", 1, batching_slot(4)) == Outcome.SUCCEEDED
    assert worker_env.runtime.store.run_status(run_id) == RunStatus.SUCCEEDED
    # the root: claim, complete (claiming the first 4 children), pool (the other 9); then
    # a step per 4 children (13 = 4 + 4 + 4 + 1: the last records one and claims the
    # join), the join's; and nothing published
    steps = [trip for trip in sent if "FCALL" in trip or "PUBLISH" in trip]
    assert steps == ["FCALL"] * 8 + ["FCALL+FCALL"], sent
    state = worker_env.runtime.store.read_state(run_id)
    assert {node.status.value for node in state.nodes.values()} == {"succeeded"}
    assert all(node.attempts == 1 for node in state.nodes.values())
    assert pool_members(worker_env, run_id) == []
    # every lease the batches held is let go once their successes are recorded
    assert worker_env.leases.holding() == []


def test_a_batch_records_the_nodes_still_the_worker_s_and_names_the_others(
    worker_env: ExecutionEnv,
) -> None:
    runtime, machine = worker_env.runtime, worker_env.runtime.machine
    run_id, _ = start(runtime, fan_out(6))
    machine.claim(run_id, "root", 1, lease_s=30, holder="w:1")
    on = RunOn("w:1", lease_s=30, max_time_limit_s=3600, batch=3)
    root_done = machine.complete(run_id, "root", 1, "null", pull_from=[QUEUE], run_on=on)
    assert root_done is not None
    first = [node for node, _claim in root_done.claimed]
    assert len(first) == 3 and len(root_done.ready) == 3  # three claimed in the step
    assert machine.pool(run_id, root_done.ready) == 3
    # the second's lease was lost meanwhile: the reconciler took it back
    assert machine.renew([LeaseRef(run_id, first[1].node_id, 1)], 0.001) == [True]
    time.sleep(0.01)
    machine.reconcile_run(run_id, publish_grace_s=60, stranded_after_s=60)
    duration = NodeDuration("function", "succeeded", 0.001)
    successes = [Success(node.node_id, node.fence, '"ok"', duration) for node in first]
    advance = machine.complete_many(run_id, successes, pull_from=[QUEUE], run_on=on)
    assert advance is not None and advance.stale == {first[1].node_id}
    nodes = runtime.store.read_state(run_id).nodes
    assert [nodes[node.node_id].status.value == "succeeded" for node in first] == [
        True,
        False,
        True,
    ]
    # the step claimed the next three for the worker: the pool's
    pooled = {node.node_id for node in root_done.ready}
    assert {node.node_id for node, _claim in advance.claimed} == pooled
    assert {nodes[node_id].status.value for node_id in pooled} == {"running"}
    again = [Success(first[0].node_id, first[0].fence, '"again"', duration)]
    assert machine.complete_many(run_id, again) is None  # recorded once only


def test_a_worker_that_dies_holding_a_batch_s_successes_loses_no_node(
    worker_env: ExecutionEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two successes are held, to be recorded with the batch's next ones, when the worker
    dies: nothing of theirs was recorded, and once the leases run out (a dead worker
    renews none) the reconciler queues every node of the batch again."""
    announce(worker_env, "one-slot", slots=1)
    worker_env.fair = False
    run_id, _ = start(worker_env.runtime, fan_out(6))
    attempt_node, ran = attempt.attempt_node, []

    def dies_at_the_third_child(env: ExecutionEnv, run: str, node: str, *args: Any) -> Any:
        if len(ran) == 3:
            raise SystemExit("killed")
        ran.append(node)
        return attempt_node(env, run, node, *args)

    monkeypatch.setattr(attempt, "attempt_node", dies_at_the_third_child)
    with pytest.raises(SystemExit):
        execute_node(worker_env, run_id, "root", 1, batching_slot(4))
    machine, store = worker_env.runtime.machine, worker_env.runtime.store
    nodes = store.read_state(run_id).nodes
    held = ran[1:]  # the root's success was recorded; the two children's were held
    assert [nodes[node].status.value for node in held] == ["running", "running"]
    assert all(nodes[node].output is None for node in held)
    running = sorted(node for node, state in nodes.items() if state.status.value == "running")
    assert len(running) == 4  # the batch: two that ran, two that did not start
    assert machine.renew([LeaseRef(run_id, node, 1) for node in running], 0.001) == [True] * 4
    time.sleep(0.01)
    found = machine.reconcile_run(run_id, publish_grace_s=60, stranded_after_s=60)
    assert sorted(node.node_id for node in found.requeued) == running


def test_successes_held_when_a_batch_s_last_node_fails_are_recorded_and_let_go(
    worker_env: ExecutionEnv,
) -> None:
    """The batch's last node fails: the successes held before it are recorded in a step of
    their own, and the worker renews none of their leases after."""
    announce(worker_env, "one-slot", slots=1)
    worker_env.fair = False
    plan = fan_out(4)
    plan[4] = {**plan[4], "function": "fail", "retry": {"max_attempts": 1}}  # c3, run last
    run_id, _ = start(worker_env.runtime, plan)
    assert execute_node(worker_env, run_id, "root", 1, batching_slot(4)) == Outcome.SUCCEEDED
    nodes = worker_env.runtime.store.read_state(run_id).nodes
    assert [nodes[f"c{i}"].status.value for i in range(4)] == ["succeeded"] * 3 + ["failed"]
    assert nodes["join"].status.value == "succeeded"  # all_done: it ran after them
    assert worker_env.leases.holding() == []
