"""Fair dispatch: a worker serving one run's chain or pooled fan-out gives its turn away
when another run's message waits (orchestrator/execution/fairness.py). The timing of it
is benchmarks/fairness.py's; these tests check the order only."""

from __future__ import annotations

import time

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.keys import QUEUE_PREFIX
from dagwright.models import Plan
from dagwright.orchestrator.execution.attempt import ExecutionEnv, Outcome, execute_node
from dagwright.orchestrator.execution.eager import EagerSlot
from dagwright.orchestrator.execution.fairness import (
    Turn,
    WaitingMessages,
    handed_over,
    next_turn,
    run_of_task,
)
from dagwright.orchestrator.runstate.machine import Advance, Dispatch, ReadyNode
from dagwright.settings import Settings
from tests.support.functions import ORDER_KEY, release_key
from tests.support.processes import Workers
from tests.support.runstate import start
from tests.support.waiting import wait_until
from tests.test_fan_out_pool import announce

QUEUE = f"{QUEUE_PREFIX}function"


def test_a_task_id_names_its_run() -> None:
    assert run_of_task("r1.node.3") == "r1"
    assert run_of_task("with.dots.node.12") == "with.dots"
    assert run_of_task("1f0c1b2e-celery-own") == ""  # not a node's message: another's
    assert run_of_task("") == ""


class Line:
    """A broker whose next messages are those of ``runs`` (for next_turn alone)."""

    def __init__(self, *task_ids: str) -> None:
        self.task_ids = list(task_ids)

    def next_task_ids(self, queues: object, depth: int) -> list[str]:
        return self.task_ids


def node(run_id: str, node_id: str) -> ReadyNode:
    return ReadyNode(run_id, node_id, 1, Dispatch(queue=QUEUE, time_limit_s=60))


def test_the_turn_goes_to_a_run_with_fewer_workers() -> None:
    slot = EagerSlot(frozenset({QUEUE}), deadline=time.monotonic() + 3600)  # just started
    chain = Advance(ready=[node("a", "next")], run_finished=None)  # a has no other worker
    shared = Advance(ready=[node("a", "next")], run_finished=None, running=1)
    pulled = Advance(ready=[node("a", "c7")], run_finished=None, running=1)
    waiting = lambda *ids: WaitingMessages(Line(*ids))  # type: ignore[arg-type]  # noqa: E731
    assert next_turn(slot, "a", shared, waiting()) is Turn.KEEP
    assert next_turn(slot, "a", shared, waiting("b.x.1")) is Turn.GIVE_WAY  # a lends a worker
    assert next_turn(slot, "a", chain, waiting("b.x.1")) is Turn.KEEP  # within its slice
    assert next_turn(slot, "a", chain, waiting("a.c1.1")) is Turn.KEEP  # a chain goes on
    assert next_turn(slot, "a", pulled, waiting("a.c1.1")) is Turn.KEEP  # its own: no matter
    busy = WaitingMessages(Line("b.x.1"), running=lambda runs: [1] * len(runs))  # type: ignore[arg-type]
    assert next_turn(slot, "a", pulled, busy) is Turn.KEEP  # one worker each
    # past its time slice, a worker gives way to a run holding as many as its own
    served = EagerSlot(frozenset({QUEUE}), deadline=time.monotonic() + 3600, started=0.0)
    assert next_turn(served, "a", chain, waiting("b.x.1")) is Turn.GIVE_WAY
    # nothing this worker would keep: the broker is not even asked
    elsewhere = ReadyNode("a", "w", 1, Dispatch("dw.writer", 60))
    assert next_turn(served, "a", Advance([elsewhere], None), waiting("b.x.1")) is Turn.KEEP
    # giving way, the pulled node goes out as a message: the run stays in line
    assert handed_over(pulled) == pulled.ready


def test_a_chain_gives_way_to_another_run_s_message(worker_env: ExecutionEnv) -> None:
    announce(worker_env, "one-slot", slots=1)
    other, _ = start(worker_env.runtime, [{"id": "x"}])
    worker_env.broker.publish([node(other, "x")])
    run_id, _ = start(worker_env.runtime, [{"id": "a"}, {"id": "b", "depends_on": ["a"]}])
    slot = EagerSlot(frozenset({QUEUE}), deadline=time.monotonic() + 3600, started=0.0)
    assert execute_node(worker_env, run_id, "a", 1, slot) == Outcome.SUCCEEDED
    assert slot.ran == []  # b was not run here: it went out, behind x
    assert worker_env.broker.queue_depth(QUEUE) == 2
    states = worker_env.runtime.store.read_state(run_id).nodes
    assert states["b"].status.value == "queued"


def test_a_small_run_goes_through_another_s_big_fan_out(
    subprocess_settings: Settings, workers: Workers
) -> None:
    """One worker process; a fan-out of 60 (whose nodes fit many times in its first
    message's time, so without fairness that one worker pulls them all before anything
    else), and a three-node chain submitted once the fan-out's root runs."""
    client = Client(subprocess_settings)
    workers.start(subprocess_settings, concurrency=1)
    big = client.submit(fan_out_plan(60))
    running = lambda: client.status(big.run_id).nodes["root"].status.value == "running"  # noqa: E731
    wait_until(running, timeout=60, what="the fan-out's root running")
    small = client.submit(chain_plan(3))
    client.runtime.client.set(release_key(big.run_id), 1)
    assert small.wait(timeout=120).status == RunStatus.SUCCEEDED
    assert big.wait(timeout=120).status == RunStatus.SUCCEEDED
    order = [str(item) for item in client.runtime.client.lrange(ORDER_KEY, 0, -1)]
    small_done = order.index(f"{small.run_id}/s2")
    big_before = [entry for entry in order[:small_done] if entry.startswith(big.run_id)]
    assert len(big_before) < 30, order  # turns of the fan-out, not all of its 60


def fan_out_plan(width: int) -> Plan:
    plan = PlanBuilder()
    root = plan.function("root", "held_until_released")
    # 10 ms each: the fan-out outlasts the worker's time slice (FAIR_SLICE_S) however fast
    # the machine (instant nodes all ran within it on a quick one, and nothing gave way)
    children = [
        plan.function(
            f"c{i}", "record_order", params={"seconds": 0.01}, depends_on=[root], timeout_s=1
        )
        for i in range(width)
    ]
    plan.function("join", "noop", depends_on=children)
    return plan.build(output="join")


def chain_plan(length: int) -> Plan:
    plan = PlanBuilder()
    previous: list[str] = []
    for i in range(length):
        previous = [plan.function(f"s{i}", "record_order", depends_on=previous)]
    return plan.build()
