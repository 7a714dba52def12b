"""AsyncClient on a real worker: the README's client example under asyncio.run gives what
the sync client gives; events, wait's timeout, cancel and the typed errors match."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import redis

from dagwright import (
    AsyncClient,
    BrokerUnavailableError,
    Client,
    PlanBuilder,
    PlanError,
    RunCancelledError,
    RunNotFinishedError,
    RunStatus,
    Settings,
    UnknownRunError,
)
from dagwright.keys import Keys
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("worker")

EXAMPLES = Path(__file__).parent.parent / "examples" / "plans"


def greetings() -> Any:
    """The README's "Python client" plan."""
    plan = PlanBuilder("Join two greetings")
    a = plan.function("a", "concat", params={"parts": ["hello"]})
    plan.function("b", "concat", params={"parts": ["left"]}, depends_on=[a])
    return plan.build()


async def readme_example(settings: Settings) -> tuple[Any, list[tuple[str, str | None]], Any]:
    """The README's example, line for line, with ``await`` and ``async for``."""
    async with AsyncClient(settings) as client:
        run = await client.submit(greetings())
        run = await client.submit(greetings(), idempotency_key="report-2026-11-23")
        result = await run.result(timeout=60)
        state = await run.status()
        events = [(event.kind, event.node) async for event in run.events()]
        await run.cancel()
        return result, events, state


def test_the_readme_example_gives_what_the_sync_client_gives(
    settings: Settings, redis_client: redis.Redis
) -> None:
    result, events, state = asyncio.run(readme_example(settings))
    sync_result = Client(settings).submit(greetings()).result(timeout=60)
    assert result == sync_result
    assert state.status == RunStatus.SUCCEEDED and state.counts.succeeded == 2
    kinds = [kind for kind, _node in events]
    assert kinds[0] == "run.submitted" and kinds[-1] == "run.succeeded"
    assert [node for kind, node in events if kind == "node.succeeded"] == ["a", "b"]


def test_events_are_those_of_the_sync_client_in_order(
    settings: Settings, redis_client: redis.Redis
) -> None:
    async def follow() -> tuple[str, list[str]]:
        async with AsyncClient(settings) as client:
            run = await client.submit(EXAMPLES / "diamond.yaml")
            return run.run_id, [event.id async for event in run.events()]

    run_id, ids = asyncio.run(follow())
    assert ids == [event.id for event in Client(settings).events(run_id)]


def test_wait_times_out_like_the_sync_one_and_cancel_stops_the_run(
    settings: Settings, redis_client: redis.Redis
) -> None:
    async def scenario() -> None:
        async with AsyncClient(settings) as client:
            plan = PlanBuilder()
            first = plan.function("first", "sleep", params={"seconds": 30})
            plan.function("second", "noop", depends_on=[first])
            run = await client.submit(plan.build())
            with pytest.raises(RunNotFinishedError, match=r"still running after 0\.2s"):
                await run.wait(timeout=0.2)
            state = await run.cancel()
            assert state.status == RunStatus.CANCELLED
            with pytest.raises(RunCancelledError):
                await run.result(timeout=5)
            assert (await client.get_run(run.run_id)).run_id == run.run_id
            assert [s.run_id for s in await client.list_runs()] == [run.run_id]
            page = await client.find_runs(status="cancelled")
            assert [s.run_id for s in page.runs] == [run.run_id]

    asyncio.run(scenario())


def test_an_unknown_run_and_a_bad_plan_raise_typed_errors(
    settings: Settings, redis_client: redis.Redis
) -> None:
    async def scenario() -> None:
        async with AsyncClient(settings) as client:
            with pytest.raises(UnknownRunError):
                await client.get_run("nosuchrun")
            with pytest.raises(UnknownRunError):
                await client.status("nosuchrun")
            with pytest.raises(UnknownRunError):
                [event async for event in client.events("nosuchrun")]
            with pytest.raises(PlanError, match="dependency cycle a -> b -> c -> a"):
                await client.submit(EXAMPLES / "cycle.yaml")

    asyncio.run(scenario())
    background = ("dw:workers:", "dw:worker-capabilities", "dw:reconciler")
    assert [key for key in redis_client.scan_iter() if not key.startswith(background)] == []


def test_an_unreachable_redis_raises_broker_unavailable(settings: Settings) -> None:
    dead = settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})

    async def scenario() -> None:
        async with AsyncClient(dead) as client:
            with pytest.raises(BrokerUnavailableError, match="cannot reach Redis"):
                await client.status("any")

    asyncio.run(scenario())


def test_a_submit_writes_what_the_sync_client_writes(
    settings: Settings, redis_client: redis.Redis
) -> None:
    async def submit() -> str:
        async with AsyncClient(settings) as client:
            run = await client.submit(greetings(), max_concurrent_nodes=1)
            await run.wait(timeout=60)
            return run.run_id

    async_id = asyncio.run(submit())
    sync_run = Client(settings).submit(greetings(), max_concurrent_nodes=1)
    sync_run.wait(timeout=60)
    keys = Keys(settings.redis.key_prefix)
    for run_id in (async_id, sync_run.run_id):  # compacted by the worker that forgets it
        wait_until(
            lambda run_id=run_id: not redis_client.sismember(keys.active_runs, run_id),
            what=f"{run_id} forgotten",
        )
    for name in ("spec", "deps"):
        assert redis_client.hgetall(keys.run_key(async_id, name)) == redis_client.hgetall(
            keys.run_key(sync_run.run_id, name)
        ), name
    statuses = [
        {node: state.status for node, state in Client(settings).status(run_id).nodes.items()}
        for run_id in (async_id, sync_run.run_id)
    ]
    assert statuses[0] == statuses[1]
    drawn_anew = {"created_at", "finished_at", "prompt_nonce", "compacted"}
    async_run = redis_client.hgetall(keys.run_key(async_id, "run"))
    sync_fields = redis_client.hgetall(keys.run_key(sync_run.run_id, "run"))
    assert set(async_run) == set(sync_fields)
    assert {k: v for k, v in async_run.items() if k not in drawn_anew} == {
        k: v for k, v in sync_fields.items() if k not in drawn_anew
    }
