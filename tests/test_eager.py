"""Eager continuation: a worker runs the node a success readied itself, without a message,
only when it serves that node's queue and its message has the time; nothing is lost if
it dies first."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
import redis
from celery.worker import state as worker_state

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.brokers.redis_lists import KOMBU_PRIORITY_STEPS
from dagwright.keys import EVENT_EXCHANGE, NODE_EXECUTE_TASK, QUEUE_PREFIX, node_task_id
from dagwright.models import Node
from dagwright.orchestrator.execution import attempt
from dagwright.orchestrator.execution.attempt import ExecutionEnv, Outcome, execute_node
from dagwright.orchestrator.execution.eager import MIN_GRACE_S, EagerSlot, eager_slot
from dagwright.orchestrator.execution.fairness import WaitingMessages
from dagwright.orchestrator.runstate.machine import Claim, Dispatch, LeaseRef, ReadyNode, Success
from dagwright.settings import Settings
from dagwright.tasks import build_app
from dagwright.tasks.node import eager_slot_for
from dagwright.telemetry.counters import NodeDuration
from tests.support.round_trips import counting_round_trips
from tests.support.runstate import start

QUEUE = f"{QUEUE_PREFIX}function"


def ready(node_id: str, queue: str = QUEUE, time_limit_s: float = 60) -> ReadyNode:
    return ReadyNode("run", node_id, 1, Dispatch(queue=queue, time_limit_s=time_limit_s))


def test_a_slot_keeps_one_node_of_a_consumed_queue_that_fits_in_the_time_left() -> None:
    slot = EagerSlot(frozenset({QUEUE}), deadline=time.monotonic() + 100)
    other_queue, too_long, fits, also_fits = (
        ready("x", queue=f"{QUEUE_PREFIX}coder"),
        ready("y", time_limit_s=100),
        ready("z"),
        ready("w"),
    )
    assert slot.keep_one([other_queue, too_long, fits, also_fits]) == [
        other_queue,
        too_long,
        also_fits,
    ]
    assert slot.keep_one([also_fits]) == [also_fits]  # one at a time
    taken = slot.take()
    assert taken is not None and (taken.node, taken.claim) == (fits, None)
    assert slot.take() is None
    assert slot.keep_one([also_fits]) == []


def test_a_node_is_kept_only_with_a_grace_before_the_message_time_limit() -> None:
    slot = EagerSlot(frozenset({QUEUE}), deadline=time.monotonic() + 30)
    assert not slot.admits(ready("a", time_limit_s=30 - MIN_GRACE_S + 0.5))
    assert slot.admits(ready("a", time_limit_s=30 - MIN_GRACE_S - 0.5))


def test_no_slot_without_known_queues_or_time_limit() -> None:
    assert eager_slot(None, 60) is None
    assert eager_slot([QUEUE], None) is None
    assert eager_slot([QUEUE], 60) is not None


def long_slot() -> EagerSlot:
    return EagerSlot(frozenset({QUEUE}), deadline=time.monotonic() + 24 * 3600)


def test_a_chain_runs_on_from_one_message_at_one_round_trip_a_node(
    worker_env: ExecutionEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    warm_up, _ = start(worker_env.runtime, [{"id": "w"}])
    assert execute_node(worker_env, warm_up, "w", 1) == Outcome.SUCCEEDED
    worker_env.broker.next_task_ids([QUEUE], 1)  # warm up: the broker's connection is made
    chain = [{"id": "a"}, *({"id": b, "depends_on": [a]} for a, b in ("ab", "bc", "cd"))]
    run_id, _ = start(worker_env.runtime, chain)
    # Fairness (fairness.py) looks at the messages waiting at most every 10 ms: here once.
    worker_env.waiting = WaitingMessages(worker_env.broker, clock=lambda: 0.0)
    with counting_round_trips(monkeypatch) as sent:
        assert execute_node(worker_env, run_id, "a", 1, long_slot()) == Outcome.SUCCEEDED
    assert worker_env.runtime.store.run_status(run_id) == RunStatus.SUCCEEDED
    # The message's node is claimed, then each success is recorded in the step that
    # claims the next node (complete.lua, RunOn): one round trip a node, no publish, no
    # confirmation. Before it, the one look at the messages waiting (a pipeline of an
    # LRANGE per priority: nobody else's, so the turn is kept whatever is readied). Once
    # the run has ended, two round trips of the run's (not a node's): its compaction and
    # forget.lua in one, then the deployment-wide steps in the order a crash cannot break
    # (decision 109).
    reading = "+".join(["LRANGE"] * len(KOMBU_PRIORITY_STEPS))
    assert [call for call in sent if call != "PING"] == [
        "FCALL",
        reading,
        *["FCALL"] * len(chain),
        "FCALL+FCALL",
        "ZADD+SREM+HGET",
    ], sent
    events = [e.kind for e in worker_env.runtime.store.read_events(run_id)]
    assert events.count("node.running") == len(chain), events
    assert worker_env.broker.queue_depth(QUEUE) == 0


def test_of_two_nodes_a_success_readies_one_is_kept_and_the_other_published(
    worker_env: ExecutionEnv,
) -> None:
    run_id, _ = start(
        worker_env.runtime,
        [{"id": "a"}, {"id": "b", "depends_on": ["a"]}, {"id": "c", "depends_on": ["a"]}],
    )
    assert execute_node(worker_env, run_id, "a", 1, long_slot()) == Outcome.SUCCEEDED
    state = worker_env.runtime.store.read_state(run_id)
    assert sorted(node.status.value for node in state.nodes.values()) == [
        "queued",
        "succeeded",
        "succeeded",
    ]
    assert worker_env.broker.queue_depth(QUEUE) == 1  # the other one's message


def test_a_worker_that_dies_before_claiming_its_kept_node_loses_nothing(
    worker_env: ExecutionEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another run's message waits: the worker may give its turn away, so the success does
    not claim the node kept, and the worker dies before its own claim."""
    run_id, _ = start(worker_env.runtime, [{"id": "a"}, {"id": "b", "depends_on": ["a"]}])
    claim_node = attempt.claim_node

    def dies_before_the_second_claim(
        worker_env: ExecutionEnv, run: str, node: str, fence: int
    ) -> Any:
        if node == "b":
            raise SystemExit("killed")
        return claim_node(worker_env, run, node, fence)

    monkeypatch.setattr(attempt, "claim_node", dies_before_the_second_claim)
    monkeypatch.setattr(attempt, "others_wait", lambda *_: True)
    with pytest.raises(SystemExit):
        execute_node(worker_env, run_id, "a", 1, long_slot())
    assert worker_env.broker.queue_depth(QUEUE) == 0  # b was kept: no message went out
    # b is still in the run's outbox: the reconciler publishes it once its grace is over
    time.sleep(0.01)  # (the outbox is scored in server milliseconds)
    found = worker_env.runtime.machine.reconcile_run(
        run_id, publish_grace_s=0.001, stranded_after_s=60
    )
    assert [node.node_id for node in found.unpublished] == ["b"]


def test_a_worker_that_dies_before_running_the_node_claimed_with_its_success_loses_nothing(
    worker_env: ExecutionEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nobody else waits: the success claims b for this worker in the same step; the
    worker dies before running it. b has a lease like any running node: once it runs
    out, the reconciler queues b again."""
    run_id, _ = start(worker_env.runtime, [{"id": "a"}, {"id": "b", "depends_on": ["a"]}])
    attempt_node = attempt.attempt_node

    def dies_before_running_b(env: ExecutionEnv, run: str, node: str, *args: Any) -> Any:
        if node == "b":
            assert args[-1] is not None  # b comes claimed: no claim of its own
            raise SystemExit("killed")
        return attempt_node(env, run, node, *args)

    monkeypatch.setattr(attempt, "attempt_node", dies_before_running_b)
    with pytest.raises(SystemExit):
        execute_node(worker_env, run_id, "a", 1, long_slot())
    machine = worker_env.runtime.machine
    state = worker_env.runtime.store.read_state(run_id)
    assert state.nodes["b"].status.value == "running"
    assert worker_env.broker.queue_depth(QUEUE) == 0
    # the lease runs out (renewed to 1 ms, as if its holder stopped renewing long ago)
    assert machine.renew([LeaseRef(run_id, "b", 1)], 0.001) == [True]
    time.sleep(0.01)
    found = machine.reconcile_run(run_id, publish_grace_s=60, stranded_after_s=60)
    assert [node.node_id for node in found.requeued] == ["b"]


def test_a_worker_runs_a_chain_from_its_first_message(worker: Any, client: Client) -> None:
    plan = PlanBuilder("chain")
    previous: list[str] = []
    for i in range(5):
        previous = [plan.function(f"n{i}", "noop", depends_on=previous)]
    before = worker_state.total_count[NODE_EXECUTE_TASK]
    state = client.submit(plan.build()).wait(timeout=30)
    assert state.status == RunStatus.SUCCEEDED
    assert worker_state.total_count[NODE_EXECUTE_TASK] - before == 1


@pytest.mark.parametrize("enabled", [True, False])
def test_eager_dispatch_is_a_setting(no_worker_settings: Settings, enabled: bool) -> None:
    app = build_app(no_worker_settings.model_copy(update={"eager_dispatch": enabled}))
    app.amqp.queues.select([QUEUE])
    task = app.tasks[NODE_EXECUTE_TASK]
    task.push_request(timelimit=(90, 60))
    try:
        slot = eager_slot_for(task)
    finally:
        task.pop_request()
    assert (slot is not None) == enabled
    assert slot is None or slot.queues == {QUEUE}


def flower_events(pubsub: redis.client.PubSub, wanted: set[str], timeout_s: float) -> list[dict]:
    """The task events seen on the broker's event channel until each of ``wanted`` task ids
    has a task-succeeded event (kombu's Redis fanout: a JSON envelope, its body base64)."""
    seen: list[dict] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.5)
        if message is None or message["type"] != "pmessage":
            continue
        envelope = json.loads(message["data"])
        body = json.loads(base64.b64decode(envelope["body"]))
        seen.extend(body if isinstance(body, list) else [body])
        done = {e["uuid"] for e in seen if e.get("type") == "task-succeeded"}
        if wanted <= done:
            break
    return seen


def test_flower_lists_the_nodes_a_worker_ran_eagerly(
    worker: Any, client: Client, settings: Settings
) -> None:
    pubsub = redis.Redis.from_url(settings.redis.broker_url or "").pubsub()
    pubsub.psubscribe(f"*{EVENT_EXCHANGE}*")  # answered before the run starts: nothing is missed
    assert pubsub.get_message(timeout=5)["type"] == "psubscribe"
    plan = PlanBuilder("chain")
    plan.function("a", "noop")
    plan.function("b", "noop", depends_on=["a"])
    run_id = client.submit(plan.build()).run_id
    assert client.wait(run_id, timeout=30).status == RunStatus.SUCCEEDED
    eager_task = node_task_id(run_id, "b", 1)
    events = flower_events(pubsub, {node_task_id(run_id, "a", 1), eager_task}, timeout_s=20)
    pubsub.close()
    of_b = {e["type"]: e for e in events if e.get("uuid") == eager_task}
    assert set(of_b) == {"task-sent", "task-received", "task-started", "task-succeeded"}
    assert of_b["task-received"]["name"] == NODE_EXECUTE_TASK
    assert of_b["task-received"]["args"] == f"run={run_id} node=b type=function fence=1"
    assert of_b["task-succeeded"]["result"] == "'succeeded'"
    assert of_b["task-received"]["hostname"] == worker.hostname


def paced(node_id: str, seconds: float) -> Success:
    """A success whose attempt took ``seconds``: the pace a batch is sized by."""
    return Success(node_id, 1, "null", NodeDuration("function", "succeeded", seconds))


def test_a_batch_is_sized_by_the_pace_of_the_last_success_within_its_window() -> None:
    slot = EagerSlot(frozenset({QUEUE}), time.monotonic() + 100, window_s=0.02, max_batch=8)
    assert slot.batch() == 1  # no pace seen yet
    assert not slot.holds_success("run", paced("a", 0.001))  # nothing held: recorded at once
    assert slot.batch() == 8  # 20 nodes of 1 ms fit: the most allowed
    slot.holds_success("run", paced("a", 0.005))
    assert slot.batch() == 4
    slot.holds_success("run", paced("a", 0.5))
    assert slot.batch() == 1  # a slow node goes alone
    assert EagerSlot(frozenset({QUEUE}), time.monotonic() + 100).batch() == 1  # no window


def test_a_success_is_held_only_before_another_claimed_node_of_its_run_and_not_for_long() -> None:
    slot = EagerSlot(frozenset({QUEUE}), time.monotonic() + 100, window_s=0.05, max_batch=3)
    claim = Claim(node=Node(id="b", type="function"), attempt=1, inputs={})
    slot.keep_claimed(
        [(ready("b"), claim), (ready("c"), claim), (ready("d"), claim)], lambda *_: True
    )
    assert slot.holds_success("run", paced("a", 0.001))
    assert not slot.holds_success("other-run", paced("x", 0.001))
    assert slot.holds_success("run", paced("b", 0.001))
    # a third would make a batch of three successes: recorded now, with those held
    assert not slot.holds_success("run", paced("c", 0.001))
    assert [item.node_id for item in slot.take_pending("run")] == ["a", "b"]
    assert slot.take_pending("run") == []
    assert slot.holds_success("run", paced("c", 0.001))
    time.sleep(0.06)  # the first held is older than the window
    assert not slot.holds_success("run", paced("d", 0.001))
    slot.held.clear()
    assert not slot.holds_success("run", paced("e", 0.001))  # none to run next
