"""Plans run end to end on a real Celery worker (threads pool) and a real Valkey: the
spine, on each broker (Redis lists and RabbitMQ's quorum queues, ``broker_settings``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagwright import (
    Client,
    PlanBuilder,
    PlanError,
    RetryPolicy,
    RunCancelledError,
    RunFailedError,
    RunNotFinishedError,
    RunStatus,
    Settings,
)
from dagwright.keys import NODE_EXECUTE_TASK
from dagwright.orchestrator.runstate.machine import ReadyNode
from tests.support.functions import executions_key
from tests.support.waiting import wait_until


@pytest.fixture
def client(broker_settings: Settings) -> Client:
    """A client of the in-process worker on the broker under test."""
    return Client(broker_settings)


@pytest.fixture
def redis_client(broker_settings: Settings) -> redis.Redis:
    """Its state store (emptied by ``broker_settings``)."""
    return redis.Redis.from_url(broker_settings.redis.url or "", decode_responses=True)


EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "plans"


def executions(redis_client: redis.Redis, run_id: str) -> dict[str, int]:
    return {node: int(n) for node, n in redis_client.hgetall(executions_key(run_id)).items()}


def test_diamond_example_succeeds_with_the_joined_result(client: Client) -> None:
    run = client.submit(EXAMPLES / "diamond.yaml")
    assert run.result(timeout=30) == "left hello + right hello"
    assert client.get_run(run.run_id).result() == "left hello + right hello"
    state = run.status()
    assert state.status == RunStatus.SUCCEEDED
    assert {n.attempts for n in state.nodes.values()} == {1}
    assert state.nodes["b"].output == "left hello"


@st.composite
def random_dags(draw: st.DrawFn) -> dict[int, list[int]]:
    size = draw(st.integers(1, 20))
    deps: dict[int, list[int]] = {}
    for i in range(size):
        earlier = st.sampled_from(range(i)) if i else st.nothing()
        deps[i] = sorted(set(draw(st.lists(earlier, max_size=3)))) if i else []
    return deps


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(random_dags())
def test_random_dags_run_each_node_once_after_all_its_dependencies(
    client: Client, redis_client: redis.Redis, dag: dict[int, list[int]]
) -> None:
    plan = PlanBuilder("random")
    for i, deps in dag.items():
        plan.function(f"n{i}", "count", depends_on=[f"n{d}" for d in deps])
    run = client.submit(plan.build())
    assert run.wait(timeout=60).status == RunStatus.SUCCEEDED
    assert executions(redis_client, run.run_id) == {f"n{i}": 1 for i in dag}
    order = [
        (e.kind, e.node)
        for e in run.events(follow=False)
        if e.kind in {"node.running", "node.succeeded"}
    ]
    for i, deps in dag.items():
        started = order.index(("node.running", f"n{i}"))
        assert all(order.index(("node.succeeded", f"n{d}")) < started for d in deps)


def test_a_node_delivered_twice_is_completed_once(
    client: Client, redis_client: redis.Redis
) -> None:
    plan = PlanBuilder()
    plan.function("slow", "count", params={"seconds": 0.5})
    run = client.submit(plan.build())
    app = client.broker.app  # type: ignore[attr-defined]
    for _ in range(3):  # the same message again, as a redelivery would
        app.send_task(NODE_EXECUTE_TASK, args=[run.run_id, "slow", 1], queue="dw.function")
    assert run.wait(timeout=30).status == RunStatus.SUCCEEDED
    assert executions(redis_client, run.run_id) == {"slow": 1}
    assert [e.kind for e in run.events(follow=False)].count("node.succeeded") == 1


class DroppingBroker:
    """Loses every publish, as a crash between the Lua commit and the publish would."""

    def __init__(self, confirm: bool) -> None:
        self.confirm = confirm

    def publish(self, nodes: list[ReadyNode]) -> list[ReadyNode]:
        return nodes if self.confirm else []

    def queue_depth(self, queue: str) -> int:
        return 0

    def next_task_ids(self, queues: object, depth: int) -> list[str]:
        return []


@pytest.mark.parametrize("confirm", [False, True], ids=["never-confirmed", "confirmed-but-lost"])
def test_a_node_whose_message_was_lost_is_published_again(
    client: Client, redis_client: redis.Redis, confirm: bool
) -> None:
    client.broker = DroppingBroker(confirm)  # type: ignore[misc]
    plan = PlanBuilder()
    a = plan.function("a", "count")
    plan.function("b", "count", depends_on=[a])
    run = client.submit(plan.build())
    assert run.wait(timeout=30).status == RunStatus.SUCCEEDED
    assert executions(redis_client, run.run_id) == {"a": 1, "b": 1}


def test_a_retryable_failure_is_retried_then_succeeds(client: Client) -> None:
    plan = PlanBuilder()
    plan.function(
        "f", "flaky", params={"fail_times": 2}, retry=RetryPolicy(max_attempts=3, backoff_s=0.1)
    )
    run = client.submit(plan.build())
    assert run.result(timeout=30) == 3
    kinds = [e.kind for e in run.events(follow=False)]
    assert kinds.count("node.retrying") == 2 and kinds.count("node.running") == 3


def test_a_permanent_failure_fails_the_run_at_once_and_blocks_dependents(client: Client) -> None:
    plan = PlanBuilder()
    bad = plan.function("bad", "fail", params={"message": "no such customer"})
    plan.function("after", "noop", depends_on=[bad])
    plan.function("side", "noop")
    run = client.submit(plan.build())
    with pytest.raises(RunFailedError) as info:
        run.result(timeout=30)
    assert "node 'bad' (function) PermanentError: no such customer" in str(info.value)
    state = run.status()
    assert state.nodes["bad"].attempts == 1
    assert state.nodes["after"].status.value == "blocked"
    assert state.nodes["side"].status.value == "succeeded"
    assert state.nodes["bad"].error is not None and "Traceback" in (
        state.nodes["bad"].error.traceback or ""
    )


def test_retries_stop_at_max_attempts(client: Client) -> None:
    plan = PlanBuilder()
    plan.function(
        "f", "flaky", params={"fail_times": 5}, retry=RetryPolicy(max_attempts=2, backoff_s=0.05)
    )
    run = client.submit(plan.build())
    assert run.wait(timeout=30).status == RunStatus.FAILED
    assert run.status().nodes["f"].attempts == 2


@pytest.mark.parametrize(
    ("function", "message"),
    [("unserializable", "the node's output is not JSON"), ("echo_inputs", "")],
)
def test_output_problems_are_permanent(client: Client, function: str, message: str) -> None:
    plan = PlanBuilder()
    plan.function("f", function)
    run = client.submit(plan.build())
    state = run.wait(timeout=30)
    if message:
        assert state.status == RunStatus.FAILED and state.nodes["f"].attempts == 1
        assert message in (state.nodes["f"].error.message if state.nodes["f"].error else "")
    else:
        assert state.result == {}


def test_cancel_stops_a_run_and_no_further_node_starts(client: Client) -> None:
    plan = PlanBuilder()
    first = plan.function("first", "sleep", params={"seconds": 30})
    plan.function("second", "noop", depends_on=[first])
    run = client.submit(plan.build())
    wait_until(lambda: run.status().nodes["first"].status.value == "running", what="first running")
    state = run.cancel()
    assert state.status == RunStatus.CANCELLED
    with pytest.raises(RunCancelledError):
        run.result(timeout=5)
    # The worker notices at its next heartbeat and stops the sleeping node.
    wait_until(
        lambda: "node.running" not in [e.kind for e in run.events(follow=False)][-1:], timeout=10
    )
    assert run.status().nodes["second"].status.value == "cancelled"
    assert run.status().nodes["second"].started_at is None


def test_wait_times_out_with_a_typed_error_while_the_run_goes_on(client: Client) -> None:
    plan = PlanBuilder()
    plan.function("s", "sleep", params={"seconds": 1.5})
    run = client.submit(plan.build())
    with pytest.raises(RunNotFinishedError, match=r"still running after 0\.2s"):
        run.wait(timeout=0.2)
    assert run.result(timeout=30) == 1.5


def test_events_follow_until_the_run_ends(client: Client) -> None:
    run = client.submit(EXAMPLES / "diamond.yaml")
    kinds = [event.kind for event in run.events()]
    assert kinds[0] == "run.submitted" and kinds[-1] == "run.succeeded"
    assert kinds.count("node.succeeded") == 4


def test_an_invalid_plan_writes_nothing(client: Client, redis_client: redis.Redis) -> None:
    with pytest.raises(PlanError, match="dependency cycle a -> b -> c -> a"):
        client.submit(EXAMPLES / "cycle.yaml")
    # The session's live worker refreshes its own records (presence, capabilities, the
    # reconcilers' leases and presence) at any moment: everything else must be absent.
    background = ("dw:workers:", "dw:worker-capabilities", "dw:reconciler")
    assert [key for key in redis_client.scan_iter() if not key.startswith(background)] == []
