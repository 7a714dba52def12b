"""Run and node priorities (1 to 5, higher first): in the broker's priority lists, in a
run's pool, and lifted by aging so that a low priority is late, never starved."""

from __future__ import annotations

import pytest
import redis

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.app import broker_priority
from dagwright.brokers.redis_lists import task_id_of
from dagwright.errors import InputError, RunOptionError
from dagwright.keys import QUEUE_PREFIX, Keys, node_task_id
from dagwright.models import AGED_PRIORITY, Plan
from dagwright.orchestrator.execution.attempt import ExecutionEnv
from dagwright.orchestrator.execution.reconciler import Reconciler
from dagwright.orchestrator.runstate.machine import Dispatch, ReadyNode
from dagwright.planning.goals import planned_plan
from dagwright.planning.plan_language import PlannedPlan
from dagwright.planning.planner import PlanRequest
from dagwright.settings import Settings
from tests.support.api_server import ApiServer
from tests.support.functions import ORDER_KEY, release_key
from tests.support.processes import Workers
from tests.support.runstate import start
from tests.support.waiting import wait_until

QUEUE = f"{QUEUE_PREFIX}function"
STREAM = 8  # urgent runs kept waiting: seconds of work ahead, however slow the feeding


def test_priorities_map_onto_each_broker_s_order() -> None:
    # kombu's Redis transport serves step 0 first; RabbitMQ (x-max-priority) the highest
    redis_steps = [broker_priority(p, "redis://h/0") for p in (AGED_PRIORITY, 5, 4, 3, 2, 1)]
    assert redis_steps == [0, 1, 2, 3, 4, 5]
    assert broker_priority(5, "redis+socket:///tmp/v.sock") == 1
    assert broker_priority(5, "amqp://guest@h//") == 5
    assert broker_priority(AGED_PRIORITY, "amqp://guest@h//") == 6


def test_a_priority_is_checked_at_submit(no_worker_settings: Settings) -> None:
    client = Client(no_worker_settings)
    built = one_node_plan()
    with pytest.raises(InputError, match="priority must be 1 to 5"):
        client.submit(built, priority=9)
    with pytest.raises(RunOptionError, match="'priority' must be int or None, not str"):
        client.submit(built, priority="5")  # type: ignore[typeddict-item]
    with pytest.raises(ValueError, match="priority"):
        Plan.model_validate({"priority": 0, "nodes": [{"id": "a", "type": "function"}]})


def test_a_planner_s_plan_sets_no_priority(no_worker_settings: Settings) -> None:
    assert "priority" not in PlannedPlan.model_json_schema()["properties"]
    with pytest.raises(ValueError, match="run options are the submitter's"):
        PlannedPlan.model_validate({"priority": 5, "nodes": [{"id": "a", "type": "function"}]})
    planned = {"nodes": [{"id": "a", "type": "function", "function": "noop", "priority": 5}]}
    plan = planned_plan(
        planned, PlanRequest(goal="g", max_nodes=5, max_depth=5), no_worker_settings
    )
    assert plan.nodes[0].priority is None  # it runs at its run's priority


def test_the_pool_gives_the_most_urgent_node_first(worker_env: ExecutionEnv) -> None:
    machine = worker_env.runtime.machine
    priorities = {"low": 1, "top": 5, "mid": 3, "two": 2}
    run_id, _ = start(worker_env.runtime, [{"id": node} for node in priorities])
    pooled = [
        ReadyNode(run_id, node, 1, Dispatch(queue=QUEUE, time_limit_s=60, priority=priority))
        for node, priority in priorities.items()
    ]
    assert machine.pool(run_id, pooled) == 4
    pulled = [machine.pull(run_id, [QUEUE])[0].node_id for _ in priorities]
    assert pulled == ["top", "mid", "two", "low"]


def test_a_node_waiting_past_aging_is_published_again_ahead_of_all(
    worker_env: ExecutionEnv,
) -> None:
    runtime = worker_env.runtime
    plan = one_node_plan()
    run_id = Client(runtime.settings).submit(plan, priority=1).run_id  # its message: step 5
    aging = runtime.settings.model_copy(update={"priority_aging_s": 0.001})
    aged_runtime = type(runtime).from_settings(aging, runtime.registry)
    reconciler = Reconciler(aged_runtime, worker_env.broker)
    wait_until(lambda: reconciler.run_once().republished, timeout=10, what="an aging pass")
    # step 0, the list named as the queue, is served before every priority's
    broker = redis.Redis.from_url(runtime.settings.redis.broker_url or "")
    top = [task_id_of(raw) for raw in broker.lrange(QUEUE, 0, -1)]
    assert top == [node_task_id(run_id, "a", 1)]
    assert broker.llen(f"{QUEUE}\x06\x165") == 1  # the first message, dropped at its claim


def test_a_later_urgent_run_goes_before_a_backlog(
    subprocess_settings: Settings, workers: Workers
) -> None:
    client = Client(subprocess_settings)
    workers.start(subprocess_settings, concurrency=1)
    gate = client.submit(held_plan(), priority=1)
    wait_for_running(client, gate.run_id, "gate")
    backlog = [client.submit(order_plan(1), priority=1) for _ in range(6)]
    urgent = client.submit(order_plan(3), priority=5)
    client.runtime.client.set(release_key(gate.run_id), 1)
    for run in [gate, urgent, *backlog]:
        assert run.wait(timeout=120).status == RunStatus.SUCCEEDED
    order = ran_in_order(client)
    first_of_backlog = min(order.index(f"{run.run_id}/n0") for run in backlog)
    assert all(order.index(f"{urgent.run_id}/n{i}") < first_of_backlog for i in range(3)), order


def test_aging_lets_a_low_priority_through_a_steady_stream_of_urgent_work(
    subprocess_settings: Settings, workers: Workers
) -> None:
    """Without aging (``priority_aging_s=0``) the low priority node waits until the
    urgent stream ends: here it never ends before the deadline."""
    settings = subprocess_settings.model_copy(update={"priority_aging_s": 1.0})
    client = Client(settings)
    workers.start(settings, concurrency=1)
    gate = client.submit(held_plan(), priority=5)
    wait_for_running(client, gate.run_id, "gate")
    low = client.submit(order_plan(1), priority=1)
    stream = [client.submit(order_plan(1, seconds=0.3), priority=5) for _ in range(STREAM)]
    client.runtime.client.set(release_key(gate.run_id), 1)

    def low_ran_while_urgent_work_waits() -> bool:
        unfinished = [run for run in stream if not run.status().status.is_final]
        for _ in range(STREAM - len(unfinished)):  # always STREAM urgent runs not done
            stream.append(client.submit(order_plan(1, seconds=0.3), priority=5))
        return low.status().status == RunStatus.SUCCEEDED

    wait_until(low_ran_while_urgent_work_waits, timeout=90, interval=0.05, what="the low run")
    assert any(not run.status().status.is_final for run in stream)  # the stream still flows


def one_node_plan() -> Plan:
    plan = PlanBuilder()
    plan.function("a", "noop")
    return plan.build()


def held_plan() -> Plan:
    plan = PlanBuilder()
    plan.function("gate", "held_until_released")
    return plan.build()


def order_plan(length: int, seconds: float = 0.0) -> Plan:
    """``length`` nodes in a line, each recording when it ran (tests.support.functions)."""
    plan = PlanBuilder()
    previous: list[str] = []
    for i in range(length):
        params = {"seconds": seconds} if seconds else {}
        previous = [plan.function(f"n{i}", "record_order", params=params, depends_on=previous)]
    return plan.build()


def wait_for_running(client: Client, run_id: str, node: str) -> None:
    running = lambda: client.status(run_id).nodes[node].status.value == "running"  # noqa: E731
    wait_until(running, timeout=60, what=f"{node} running")


def ran_in_order(client: Client) -> list[str]:
    return [str(item) for item in client.runtime.client.lrange(ORDER_KEY, 0, -1)]


def test_the_api_takes_a_priority_and_refuses_one_out_of_range(
    api: ApiServer, redis_client: redis.Redis, settings: Settings
) -> None:
    plan = {"nodes": [{"id": "a", "type": "function", "function": "noop"}]}
    with api.http("operate") as http:
        refused = http.post("/api/v1/runs", json={"plan": plan, "priority": 9})
        assert refused.status_code == 422  # the document's bound, as the server enforces it
        assert refused.json()["detail"] == "priority: Input should be less than or equal to 5"
        submitted = http.post("/api/v1/runs", json={"plan": plan, "priority": 5})
        assert submitted.status_code == 201, submitted.text
    # The run's priority, which its nodes are dispatched at (a succeeded run's dispatch
    # column is dropped at its end: docs/internals/retention.md).
    key = Keys(settings.redis.key_prefix).run_key(submitted.json()["run_id"], "run")
    assert redis_client.hget(key, "priority") == "5"
