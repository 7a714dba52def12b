"""The memory tool end to end: offered as the API defines it (``memory_20250818``), its
commands played by the strict fake, run by a real worker on a real Valkey, under the tool
policy; and the fake refusing what the real API refuses."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.errors import ConfigurationError
from dagwright.keys import Keys
from dagwright.registry import build_registry
from dagwright.settings import AgentMemorySettings, MemoryToolRule
from dagwright.testing import FakeAnthropicServer
from dagwright.workers.agent_spec import AgentSpec
from tests.support.functions import ARCHIVIST
from tests.support.llm_script import call, text, turn
from tests.support.settings import TEST_API_KEY


def memory_call(**command: Any) -> dict[str, Any]:
    return call("memory", **command)


def results_of(request_body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of a request's last message."""
    content = request_body["messages"][-1]["content"]
    return [block for block in content if block.get("type") == "tool_result"]


def archivist_run(client: Client, instruction: str = "Keep the notes.") -> Any:
    plan = PlanBuilder()
    plan.agent("keep", "archivist", instruction)
    return client.submit(plan.build())


@pytest.mark.usefixtures("worker")
def test_the_model_writes_and_reads_its_memory_through_the_api_defined_tool(
    client: Client, fake_llm: FakeAnthropicServer, settings: Settings
) -> None:
    fake_llm.add(
        turn(ARCHIVIST, 1, memory_call(command="view", path="/memories")),
        turn(
            ARCHIVIST,
            3,
            memory_call(command="create", path="/memories/seen.md", file_text="- item 1\n"),
        ),
        turn(ARCHIVIST, 5, memory_call(command="view", path="/memories/seen.md")),
        turn(ARCHIVIST, 7, text("noted")),
    )
    run = archivist_run(client)
    state = run.wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, state

    requests = [r.body for r in fake_llm.requests]
    assert {"type": "memory_20250818", "name": "memory"} in requests[0]["tools"]
    listing, created, shown = (results_of(body)[0] for body in requests[1:4])
    assert (
        "Here're the files and directories up to 2 levels deep in /memories" in listing["content"]
    )
    assert "File created successfully at: /memories/seen.md" in created["content"]
    assert "     1\t- item 1" in shown["content"]
    assert not any(r["is_error"] for r in (listing, created, shown))

    keys = Keys(settings.redis.key_prefix)
    files = client.runtime.client.hgetall(keys.memory_files(f"run:{run.run_id}"))
    assert files == {"/memories/seen.md": "- item 1\n"}
    spans = [s for s in client.trace(run.run_id).spans if s.name == "memory.command"]
    assert [(s.attributes["command"], s.attributes["path"]) for s in spans] == [
        ("view", "/memories"),
        ("create", "/memories/seen.md"),
        ("view", "/memories/seen.md"),
    ]


@pytest.mark.usefixtures("worker")
def test_a_path_escape_an_oversize_write_and_a_denied_command_are_refused_with_the_reason(
    client: Client, fake_llm: FakeAnthropicServer, settings: Settings
) -> None:
    too_big = "x" * (settings.memory.max_file_bytes + 1)
    fake_llm.add(
        turn(
            ARCHIVIST,
            1,
            memory_call(command="create", path="/memories/../etc/passwd", file_text="root"),
            memory_call(command="create", path="/memories/big.md", file_text=too_big),
        ),
        turn(
            ARCHIVIST,
            3,
            memory_call(command="create", path="/memories/a.md", file_text=f"key {TEST_API_KEY}"),
        ),
        turn(ARCHIVIST, 5, memory_call(command="delete", path="/memories/a.md")),
        turn(ARCHIVIST, 7, text("done")),
    )
    run = archivist_run(client)
    assert run.wait(timeout=60).status == RunStatus.SUCCEEDED

    requests = [r.body for r in fake_llm.requests]
    escape, oversize = results_of(requests[1])
    assert escape["is_error"] and "would escape /memories directory" in escape["content"]
    assert oversize["is_error"] and "per memory file" in oversize["content"]
    (denied,) = results_of(requests[3])
    assert denied["is_error"]
    assert denied["content"] == "refused by the tool policy: the archive keeps everything"
    files = client.runtime.client.hgetall(
        Keys(settings.redis.key_prefix).memory_files(f"run:{run.run_id}")
    )
    assert list(files) == ["/memories/a.md"]  # kept: the delete was denied
    assert TEST_API_KEY not in files["/memories/a.md"]  # masked before it was stored
    assert [(e.tool, e.action) for e in client.audit(run.run_id)] == [
        ("memory", "refused"),
        ("memory", "refused"),
        ("memory", "allow"),
        ("memory", "deny"),
    ]


@pytest.mark.parametrize(
    ("tool", "said"),
    [
        ({"type": "memory_20250818", "name": "notes"}, "name: Input should be 'memory'"),
        (
            {"type": "memory_20250818", "name": "memory", "description": "mine"},
            "description: Extra inputs are not permitted",
        ),
        (
            {"type": "memory_20250818", "name": "memory", "input_schema": {"type": "object"}},
            "input_schema: Extra inputs are not permitted",
        ),
        ({"type": "memory_20990101", "name": "memory"}, "does not match any of the expected"),
    ],
)
def test_the_fake_refuses_a_malformed_memory_tool_as_the_api_does(
    fake_llm: FakeAnthropicServer, settings: Settings, tool: dict[str, Any], said: str
) -> None:
    fake_llm.add(turn(ARCHIVIST, 1, text("hi")))
    sdk = anthropic.Anthropic(api_key=TEST_API_KEY, base_url=fake_llm.base_url, max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match=said.replace("(", r"\(")):
        sdk.messages.create(
            model=settings.llm.default_model,
            max_tokens=100,
            system=ARCHIVIST,
            messages=[{"role": "user", "content": "hi"}],
            tools=[tool],  # type: ignore[list-item]
        )


def test_the_fake_plays_no_memory_call_the_request_does_not_offer(
    fake_llm: FakeAnthropicServer, settings: Settings
) -> None:
    fake_llm.add(turn(ARCHIVIST, 1, memory_call(command="view", path="/memories")))
    sdk = anthropic.Anthropic(api_key=TEST_API_KEY, base_url=fake_llm.base_url, max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="does not offer the memory tool"):
        sdk.messages.create(
            model=settings.llm.default_model,
            max_tokens=100,
            system=ARCHIVIST,
            messages=[{"role": "user", "content": "hi"}],
        )


def test_settings_attach_the_memory_tool_and_its_rules_to_a_type(settings: Settings) -> None:
    rule = MemoryToolRule(action="allow", when={"command": "view"})
    attached = settings.model_copy(
        update={"agent_memory": {"researcher": AgentMemorySettings(read_only=True, rules=[rule])}}
    )
    spec = build_registry(attached).declaration("researcher")
    assert isinstance(spec, AgentSpec)
    assert "memory" in spec.tools
    assert spec.policy.decide("memory", {"command": "view", "path": "/memories"}).action == "allow"
    assert spec.policy.decide("memory", {"command": "create"}).action == "deny"
    unknown = settings.model_copy(update={"agent_memory": {"nobody": AgentMemorySettings()}})
    with pytest.raises(ConfigurationError, match="agent_memory names 'nobody', which is no agent"):
        build_registry(unknown)


@pytest.mark.usefixtures("worker")
def test_a_plan_names_the_namespace_its_runs_share(
    client: Client, fake_llm: FakeAnthropicServer, settings: Settings
) -> None:
    fake_llm.add(
        turn(ARCHIVIST, 1, memory_call(command="create", path="/memories/t.md", file_text="t")),
        turn(ARCHIVIST, 3, text("kept")),
    )
    plan = PlanBuilder()
    plan.agent("keep", "archivist", "Keep it.")
    run = client.submit(plan.build().model_copy(update={"memory": "team-notes"}))
    assert run.wait(timeout=60).status == RunStatus.SUCCEEDED
    keys = Keys(settings.redis.key_prefix)
    assert client.runtime.client.hgetall(keys.memory_files("team-notes")) == {"/memories/t.md": "t"}
    assert not client.runtime.client.exists(keys.memory_files(f"run:{run.run_id}"))
