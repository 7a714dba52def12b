"""A submitted run as an MCP task, driven by the real ``mcp`` client SDK with a tasks
client (tests/support/mcp_tasks.py): the task follows the run, a node waiting for
approval is ``input_required`` with the approval's question, the result is the run's,
cancelling the task cancels the run; a client without tasks gets the run."""

from __future__ import annotations

import time

import anyio
import pytest
import redis
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, EmptyResult

from dagwright.settings import Settings
from tests.support.api_server import ApiServer
from tests.support.mcp_sessions import GATED, HELD, http_session, run, stdio_session
from tests.support.mcp_tasks import (
    CancelTask,
    DetailedTask,
    GetTask,
    TaskFollower,
    TaskIdParams,
    TaskUpdateParams,
    UpdateTask,
)

pytestmark = pytest.mark.usefixtures("worker")


def test_a_waiting_approval_is_input_required_and_the_result_the_tasks_over_stdio(
    settings: Settings, redis_client: redis.Redis
) -> None:
    tasks = TaskFollower()

    async def session() -> None:
        async with stdio_session(settings, extensions=[tasks]) as mcp:
            answer = await mcp.call("submit_run", plan=GATED)
            assert answer["result"] == "release v1"
            [run_id] = tasks.task_ids
            assert answer["run_id"] == run_id
            assert "input_required" in tasks.statuses and tasks.statuses[-1] == "completed"
            [(key, asked)] = tasks.asked.items()
            assert asked["method"] == "elicitation/create"
            message = asked["params"]["message"]
            assert run_id in message and "'deploy'" in message and "release" in message
            assert key.startswith("approval-")
            assert await mcp.call("list_approvals", run_id=run_id) == []  # decided

    run(session)


def test_cancelling_the_task_cancels_the_run_over_http(api: ApiServer) -> None:
    tasks = TaskFollower(cancel_when_working=True)

    async def session() -> None:
        async with http_session(f"{api.url}/mcp", api.token("operate"), [tasks]) as mcp:
            result = await mcp.client.call_tool("submit_run", {"plan": HELD})
            assert result.is_error and "cancelled" in result.content[0].text  # type: ignore[union-attr]

    run(session)
    [run_id] = tasks.task_ids
    assert api.client.status(run_id).status.value == "cancelled"
    assert tasks.statuses[-1] == "cancelled"


def test_a_client_without_tasks_gets_the_run_and_follows_it(api: ApiServer) -> None:
    async def session() -> None:
        async with http_session(f"{api.url}/mcp", api.token("operate")) as mcp:
            submitted = await mcp.call("submit_run", plan=GATED)
            assert submitted["status"] == "running" and "nodes" in submitted

    run(session)


def test_a_read_token_reads_a_task_but_cannot_decide_or_cancel_it(api: ApiServer) -> None:
    run_id = api.client.submit(GATED).run_id
    tasks = TaskFollower()

    async def session() -> None:
        async with http_session(f"{api.url}/mcp", api.token("read"), [tasks]) as mcp:
            session = mcp.client.session

            async def task() -> DetailedTask:
                request = GetTask(method="tasks/get", params=TaskIdParams(task_id=run_id))
                return await session.send_request(request, DetailedTask)

            deadline = time.monotonic() + 30
            while (found := await task()).status != "input_required":
                assert time.monotonic() < deadline, found
                await anyio.sleep(0.2)
            [key] = found.input_requests or {}
            answer = {key: {"action": "accept", "content": {"decision": "approve"}}}
            update = TaskUpdateParams(task_id=run_id, input_responses=answer)
            with pytest.raises(MCPError, match="needs the operate scope; your token has read"):
                await session.send_request(
                    UpdateTask(method="tasks/update", params=update), EmptyResult
                )
            cancel = CancelTask(method="tasks/cancel", params=TaskIdParams(task_id=run_id))
            with pytest.raises(MCPError, match="operate scope"):
                await session.send_request(cancel, EmptyResult)
            unknown = GetTask(method="tasks/get", params=TaskIdParams(task_id="nope"))
            with pytest.raises(MCPError, match="Failed to retrieve task") as error:
                await session.send_request(unknown, DetailedTask)
            assert error.value.error.code == INVALID_PARAMS

    run(session)
    assert api.client.approvals.list(run_id)[0].decision is None  # still waiting
    assert api.client.status(run_id).status.value == "running"
