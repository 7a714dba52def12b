"""A submit names its run's memory namespace (issue 28): ``memory=`` of ``Client.submit``
and ``AsyncClient.submit``, ``dagwright run --memory``, the API's submit body and the MCP
``submit_run`` argument, each a field of the one RunRequest. The submit's name wins over
the plan's ``memory:`` (decision 89); a name that is no namespace is refused with the
checker's one line at every door, before anything is written."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dagwright import AsyncClient, Client, PlanBuilder, RunStatus, Settings
from dagwright.errors import InputError
from dagwright.keys import Keys
from dagwright.memory.namespaces import MEMORY_FIELD
from dagwright.models import Plan
from dagwright.testing import FakeAnthropicServer
from tests.support.api_server import ApiServer
from tests.support.cli import cli_env, dagwright, one_error_line
from tests.support.functions import ARCHIVIST
from tests.support.llm_script import call, text, turn
from tests.support.mcp_sessions import ToolFailed, http_session, run

pytestmark = pytest.mark.usefixtures("worker")

BAD_NAME_LINE = (
    "'Team:X' is no memory namespace: a name is lowercase letters, digits, '_', '.', "
    "'-' (up to 63), or schedule:<name> / run:<id>"
)


def archivist_plan(memory: str | None = None) -> Plan:
    plan = PlanBuilder()
    plan.agent("keep", "archivist", "Keep it.")
    return plan.build().model_copy(update={"memory": memory})


def concat_plan() -> Plan:
    plan = PlanBuilder("Greet")
    plan.function("hello", "concat", params={"parts": ["hello"]})
    return plan.build()


def named_namespace(client: Client, run_id: str) -> str | None:
    run_hash = client.runtime.keys.run_key(run_id, "run")
    return client.runtime.client.hget(run_hash, MEMORY_FIELD)  # type: ignore[return-value]


def test_a_run_submitted_with_memory_writes_into_that_namespace_over_its_plans(
    client: Client, fake_llm: FakeAnthropicServer, settings: Settings
) -> None:
    fake_llm.add(
        turn(ARCHIVIST, 1, call("memory", command="create", path="/memories/d.md", file_text="d")),
        turn(ARCHIVIST, 3, text("kept")),
    )
    run_handle = client.submit(archivist_plan("plan-notes"), memory="team-digest")
    assert run_handle.wait(timeout=60).status == RunStatus.SUCCEEDED
    keys, redis = Keys(settings.redis.key_prefix), client.runtime.client
    assert redis.hgetall(keys.memory_files("team-digest")) == {"/memories/d.md": "d"}
    assert not redis.exists(keys.memory_files("plan-notes"))
    assert not redis.exists(keys.memory_files(f"run:{run_handle.run_id}"))


def test_async_submit_names_the_namespace_too(client: Client, settings: Settings) -> None:
    async def submit() -> str:
        async with AsyncClient(settings) as async_client:
            handle = await async_client.submit(concat_plan(), memory="team-digest")
            await handle.wait(timeout=30)
            return handle.run_id

    run_id = asyncio.run(submit())
    assert named_namespace(client, run_id) == "team-digest"


def test_without_memory_the_plans_namespace_stays(client: Client) -> None:
    run_id = client.submit(concat_plan().model_copy(update={"memory": "plan-notes"})).run_id
    assert named_namespace(client, run_id) == "plan-notes"
    assert named_namespace(client, client.submit(concat_plan()).run_id) is None


def test_a_name_that_is_no_namespace_is_refused_with_one_line(client: Client) -> None:
    with pytest.raises(InputError) as raised:
        client.submit(concat_plan(), memory="Team:X")
    assert str(raised.value) == BAD_NAME_LINE
    with pytest.raises(InputError, match="is no memory namespace"):
        client.submit(concat_plan(), memory="schedule:nightly")  # derived: not a submit's
    assert client.find_runs().runs == []


def test_the_api_body_names_the_namespace(api: ApiServer, client: Client) -> None:
    plan = concat_plan().model_dump(mode="json", exclude_defaults=True)
    with api.http("operate") as http:
        accepted = http.post("/api/v1/runs", json={"plan": plan, "memory": "team-digest"})
        refused = http.post("/api/v1/runs", json={"plan": plan, "memory": "Team:X"})
    assert accepted.status_code == 201, accepted.text
    assert named_namespace(client, accepted.json()["run_id"]) == "team-digest"
    assert refused.status_code == 422, refused.text  # as any InputError (server/problems.py)
    assert refused.json()["detail"] == BAD_NAME_LINE


def test_the_mcp_submit_run_names_the_namespace(api: ApiServer, client: Client) -> None:
    plan = concat_plan().model_dump(mode="json", exclude_defaults=True)

    async def session() -> None:
        async with http_session(f"{api.url}/mcp", api.token("operate")) as mcp:
            submitted = await mcp.call("submit_run", plan=plan, memory="team-digest")
            assert named_namespace(client, submitted["run_id"]) == "team-digest"
            with pytest.raises(ToolFailed, match="is no memory namespace"):
                await mcp.call("submit_run", plan=plan, memory="Team:X")

    run(session)


def test_the_cli_refuses_a_bad_name_before_any_stack_starts(tmp_path: Path) -> None:
    plan_file = tmp_path / "greet.yaml"
    plan_file.write_text("nodes:\n  - {id: hello, type: function, function: noop}\n")
    env = cli_env(None, tmp_path / "data")
    refused = dagwright("run", str(plan_file), "--memory", "Team:X", env=env, timeout=60)
    assert refused.returncode == 2
    assert one_error_line(refused) == BAD_NAME_LINE
