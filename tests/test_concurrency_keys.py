"""Per-key concurrency of runs (a plan's ``concurrency: {key: "{{ inputs.customer }}",
limit: 2}``), with the session's real worker and reconciler on a real Valkey: at most
``limit`` runs of a key at once, the others accepted and shown waiting, another key's runs
not held, and a place given back however its run ends."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis

from dagwright import AsyncClient, Client, RunStatus
from dagwright.errors import PlanError, RunInputError
from dagwright.models import NodeStatus, Plan, RunState
from dagwright.settings import Settings
from tests.support.api_server import ApiServer
from tests.support.functions import overlap_key, release_key
from tests.support.waiting import wait_until

SCHEMA = {
    "type": "object",
    "properties": {"customer": {"type": "string"}},
    "required": ["customer"],
}


def keyed_plan(node: dict[str, Any], *, key: str = "{{ inputs.customer }}", limit: int = 2) -> Plan:
    return Plan.model_validate(
        {
            "goal": "one customer's work",
            "inputs": SCHEMA,
            "concurrency": {"key": key, "limit": limit},
            "nodes": [{"id": "work", "type": "function", **node}],
        }
    )


HELD = {"function": "held_until_released"}


def node_status(client: Client, run_id: str) -> NodeStatus:
    return client.status(run_id).nodes["work"].status


def running(client: Client, run_id: str) -> bool:
    return node_status(client, run_id) == NodeStatus.RUNNING


def test_a_third_run_of_a_key_waits_and_says_so_while_another_key_runs(
    api: ApiServer, redis_client: redis.Redis, worker: Any
) -> None:
    client = api.client
    plan = keyed_plan(HELD)
    first, second, third = (
        client.submit(plan, inputs={"customer": "acme"}).run_id for _ in range(3)
    )
    wait_until(lambda: running(client, first) and running(client, second), what="two run")
    other = client.submit(plan, inputs={"customer": "globex"}).run_id
    wait_until(lambda: running(client, other), what="the other key's run is not held")

    state = client.status(third)
    assert state.status == RunStatus.RUNNING
    wait = state.nodes["work"].waiting
    assert state.nodes["work"].status == NodeStatus.RETRY_WAIT and wait is not None
    assert wait.describe() == "waiting for concurrency key customer=acme: 2 of 2 runs running"
    with api.http("read") as http:
        body = http.get(f"/api/v1/runs/{third}").json()
    assert body["nodes"]["work"]["waiting"]["description"] == wait.describe()
    assert (
        redis_client.hget(client.runtime.keys.run_key(third, "run"), "fair_key") == "customer=acme"
    )

    redis_client.set(release_key(first), 1)
    wait_until(lambda: running(client, third), what="the third run takes the freed place")
    assert node_status(client, second) == NodeStatus.RUNNING
    for run_id in (second, third, other):
        redis_client.set(release_key(run_id), 1)
    for run_id in (first, second, third, other):
        assert client.get_run(run_id).wait(timeout=30).status == RunStatus.SUCCEEDED
    # a run gives its place back once its end is seen (its last worker's forget, a step
    # after the end a waiter is told of): on a loaded machine, a moment after `wait`
    holders = client.runtime.keys.key_holders("customer=acme")
    wait_until(lambda: redis_client.zcard(holders) == 0, what="every place given back")


def test_never_more_than_the_limit_of_a_key_at_once(
    client: Client, redis_client: redis.Redis, worker: Any
) -> None:
    plan = keyed_plan({"function": "overlap", "params": {"seconds": 0.3, "group": "acme"}})
    handles = [client.submit(plan, inputs={"customer": "acme"}) for _ in range(5)]
    for handle in handles:
        assert handle.wait(timeout=60).status == RunStatus.SUCCEEDED
    assert redis_client.hget(overlap_key("acme"), "max") == "2"


@pytest.mark.parametrize("end", ["cancel", "timeout", "failure"])
def test_a_place_is_given_back_however_its_run_ends(
    client: Client, redis_client: redis.Redis, worker: Any, end: str
) -> None:
    plan = keyed_plan(HELD, limit=1)
    holder_options: dict[str, Any] = {"timeout_s": 1} if end == "timeout" else {}
    if end == "failure":
        plan = keyed_plan({"function": "flaky", "params": {"permanent": True}}, limit=1)
    holder = client.submit(plan, inputs={"customer": "acme"}, **holder_options).run_id
    waiter = client.submit(keyed_plan(HELD, limit=1), inputs={"customer": "acme"}).run_id
    if end == "cancel":
        wait_until(lambda: running(client, holder), what="the holder runs")
        client.cancel(holder)
    wait_until(lambda: running(client, waiter), timeout=30, what="the waiter starts")
    assert client.status(holder).status in (RunStatus.CANCELLED, RunStatus.FAILED)
    redis_client.set(release_key(waiter), 1)
    assert client.get_run(waiter).wait(timeout=30).status == RunStatus.SUCCEEDED


def test_a_waiting_run_cancelled_leaves_no_place_taken(
    client: Client, redis_client: redis.Redis, worker: Any
) -> None:
    plan = keyed_plan(HELD, limit=1)
    holder = client.submit(plan, inputs={"customer": "acme"}).run_id
    waiting = client.submit(plan, inputs={"customer": "acme"}).run_id
    third = client.submit(plan, inputs={"customer": "acme"}).run_id
    wait_until(lambda: running(client, holder), what="the holder runs")
    client.cancel(waiting)
    redis_client.set(release_key(holder), 1)
    wait_until(lambda: running(client, third), timeout=30, what="the third starts")
    assert client.status(waiting).nodes["work"].status == NodeStatus.CANCELLED
    redis_client.set(release_key(third), 1)
    assert client.get_run(third).wait(timeout=30).status == RunStatus.SUCCEEDED


def test_a_run_waiting_too_long_for_its_key_fails_saying_why(
    client: Client, redis_client: redis.Redis, worker: Any
) -> None:
    plan = keyed_plan(HELD, limit=1)
    holder = client.submit(plan, inputs={"customer": "acme"}).run_id
    wait_until(lambda: running(client, holder), what="the holder runs")
    short = client.runtime.settings.model_copy(update={"concurrency_key_max_wait_s": 0.5})
    from dagwright.orchestrator.control.run_gates import RunGates
    from dagwright.orchestrator.runtime import Runtime

    late = client.submit(plan, inputs={"customer": "acme"}).run_id
    gates = RunGates(Runtime.from_settings(short))
    wait_until(
        lambda: (admission := gates.admit(late)) is not None and admission.expired,
        timeout=10,
        what="the wait expires",
    )
    state = client.status(late)
    assert state.status == RunStatus.FAILED
    assert "DAGWRIGHT_CONCURRENCY_KEY_MAX_WAIT_S" in (state.reason or "")
    redis_client.set(release_key(holder), 1)


def test_a_key_naming_an_undeclared_input_or_missing_a_value_is_refused(client: Client) -> None:
    with pytest.raises(PlanError, match="concurrency key"):
        client.submit(keyed_plan(HELD, key="{{ inputs.tenant }}"), inputs={"customer": "a"})
    optional = keyed_plan(HELD).model_copy(
        update={
            "inputs": {
                **SCHEMA,
                "required": [],
                "properties": {**SCHEMA["properties"], "x": {"type": "string"}},
            }
        }
    )
    with pytest.raises(RunInputError, match="concurrency key"):
        client.submit(optional, inputs={"x": "a"})


def test_a_nodes_own_key_limits_its_nodes_across_runs(
    client: Client, redis_client: redis.Redis, worker: Any
) -> None:
    plan = Plan.model_validate(
        {
            "goal": "one sync per customer at once",
            "inputs": SCHEMA,
            "nodes": [
                {
                    "id": "sync",
                    "type": "function",
                    "function": "overlap",
                    "params": {"seconds": 0.3, "group": "sync-acme"},
                    "concurrency": {"key": "sync-{{ inputs.customer }}", "limit": 1},
                }
            ],
        }
    )
    handles = [client.submit(plan, inputs={"customer": "acme"}) for _ in range(3)]
    for handle in handles:
        assert handle.wait(timeout=60).status == RunStatus.SUCCEEDED
    assert redis_client.hget(overlap_key("sync-acme"), "max") == "1"
    spec = redis_client.hget(client.runtime.keys.run_key(handles[0].run_id, "spec"), "sync")
    assert '"key":"sync-acme"' in (spec or "")  # stored rendered: no template at claim


def test_the_async_client_admits_or_parks_as_the_sync_one(no_worker_settings: Settings) -> None:
    plan = keyed_plan(HELD, limit=1)

    async def submit_two() -> list[RunState]:
        async with AsyncClient(no_worker_settings) as client:
            runs = [await client.submit(plan, inputs={"customer": "acme"}) for _ in range(2)]
            return [await client.status(run.run_id) for run in runs]

    first, second = asyncio.run(submit_two())
    assert first.nodes["work"].status == NodeStatus.QUEUED  # took the key's one place
    assert second.nodes["work"].status == NodeStatus.RETRY_WAIT
    wait = second.nodes["work"].waiting
    assert wait is not None and wait.describe().endswith("customer=acme: 1 of 1 runs running")


def test_a_place_left_by_a_run_that_is_gone_is_taken_back(
    client: Client, redis_client: redis.Redis, worker: Any
) -> None:
    # A holder whose release was lost (its process died between the end and the release,
    # then its keys expired): no run hash any more. The next admission drops it.
    holders = client.runtime.keys.key_holders("customer=acme")
    redis_client.zadd(holders, {"ghost-run": 1})
    run_id = client.submit(keyed_plan(HELD, limit=1), inputs={"customer": "acme"}).run_id
    wait_until(lambda: running(client, run_id), timeout=30, what="the run takes the place")
    assert redis_client.zrange(holders, 0, -1) == [run_id]
    redis_client.set(release_key(run_id), 1)
    assert client.get_run(run_id).wait(timeout=30).status == RunStatus.SUCCEEDED
