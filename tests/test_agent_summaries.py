"""The client-side fallback of context management, with a scripted LLM and in-memory
services: past the trigger, older turns are replaced by a summary the model writes in one
bounded call, checkpointed with the conversation it made, so a resumed node repeats no
call; and the API's clearing is what the budget check expects the model to read."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from dagwright.errors import NodeLostError
from dagwright.llm.context_management import CLEAR_TOOL_USES
from dagwright.settings import Settings
from dagwright.testing.scripted import ScriptedLLM, text, tool_use
from dagwright.workers import builtin_registry
from dagwright.workers.agent_context import SUMMARY_HEADER, SUMMARY_SYSTEM, batched_keep
from dagwright.workers.agent_loop import AgentSpec, run_agent
from dagwright.workers.tools.policy import ToolPolicy
from tests.support.agents import MemoryServices, agent_context, agent_node

SPEC = AgentSpec(
    name="tester",
    description="test agent",
    system_prompt="You test.",
    tools=("workspace_write",),
    policy=ToolPolicy.allowing("workspace_write"),
    model="claude-test",  # listed by no context editing page: the summary fallback
    max_tokens=1000,
)
SMALL_CONTEXT = {"agent_context_trigger_tokens": 1_000, "agent_context_keep_tool_uses": 1}


def writes(*paths: str, read: int = 10, chars: int = 2_000) -> list[Any]:
    """Tool calls writing ``chars`` characters each; each response says it read ``read``."""
    content = "x" * chars
    return [
        tool_use("workspace_write", {"path": path, "content": content}, input_tokens=read)
        for path in paths
    ]


def test_past_the_trigger_older_turns_become_a_summary(tmp_path: Path) -> None:
    script = [*writes("a.txt"), *writes("b.txt", read=5_000), text("Wrote a.txt."), text("Done.")]
    llm = ScriptedLLM(script)
    services = MemoryServices(llm, tmp_path)
    ctx = agent_context(services, settings=Settings(**SMALL_CONTEXT))
    assert run_agent(ctx, agent_node(), SPEC, builtin_registry().tools) == "Done."
    summary_call, after = llm.requests[2], llm.requests[3]
    assert summary_call.system == SUMMARY_SYSTEM and summary_call.tools == []
    assert "[call] workspace_write" in summary_call.messages[0]["content"]
    assert summary_call.max_tokens == Settings().agent_context.summary_max_tokens
    task, summary = after.messages[0]["content"]
    assert "Do the task." in task["text"]  # the first message, as it was
    assert summary["text"] == f"{SUMMARY_HEADER}\n\nWrote a.txt."
    assert [m["role"] for m in after.messages] == ["user", "assistant", "user"]  # b.txt kept
    assert services.usage.llm_calls == 4  # the summary is a call like any other


def test_a_node_resumed_after_its_summary_makes_neither_call_again(tmp_path: Path) -> None:
    script = [
        *writes("a.txt"),
        *writes("b.txt", read=5_000),
        text("Wrote a.txt."),
        NodeLostError("x"),
    ]
    first = ScriptedLLM(script)
    crashed = MemoryServices(first, tmp_path)
    with pytest.raises(NodeLostError):
        run_agent(
            agent_context(crashed, settings=Settings(**SMALL_CONTEXT)),
            agent_node(),
            SPEC,
            builtin_registry().tools,
        )
    second = ScriptedLLM([text("Done.")])
    resumed = MemoryServices(second, tmp_path)
    ctx = agent_context(
        resumed, checkpoint=crashed.checkpoints[-1], settings=Settings(**SMALL_CONTEXT)
    )
    assert run_agent(ctx, agent_node(), SPEC, builtin_registry().tools) == "Done."
    assert len(second.requests) == 1  # no summary asked again, no tool call made again
    assert SUMMARY_HEADER in second.requests[0].messages[0]["content"][-1]["text"]


def test_context_management_off_keeps_every_turn(tmp_path: Path) -> None:
    script = [*writes("a.txt"), *writes("b.txt", read=5_000), text("Done.")]
    llm = ScriptedLLM(script)
    services = MemoryServices(llm, tmp_path)
    settings = Settings(**SMALL_CONTEXT, agent_context_management="off")
    assert (
        run_agent(
            agent_context(services, settings=settings), agent_node(), SPEC, builtin_registry().tools
        )
        == "Done."
    )
    assert len(llm.requests) == 3 and len(llm.requests[2].messages) == 5


def test_a_model_with_context_editing_is_sent_a_batched_clearing_edit(tmp_path: Path) -> None:
    llm = ScriptedLLM([*writes("a.txt", "b.txt", "c.txt"), text("Done.")])
    services = MemoryServices(llm, tmp_path)
    spec = dataclasses.replace(SPEC, model="claude-sonnet-5-5")
    settings = Settings(agent_context_keep_tool_uses=1, agent_context_clear_batch=2)
    run_agent(
        agent_context(services, settings=settings), agent_node(), spec, builtin_registry().tools
    )
    edits = [r.context_management["edits"][0] for r in llm.requests if r.context_management]
    assert {e["type"] for e in edits} == {CLEAR_TOOL_USES}
    assert [e["keep"]["value"] for e in edits] == [0, 1, 2, 1]  # cleared two at a time
    assert edits[0]["trigger"] == {
        "type": "input_tokens",
        "value": settings.agent_context.trigger_tokens,
    }


def test_older_tool_uses_are_cleared_a_batch_at_a_time_never_the_latest() -> None:
    kept = [batched_keep(uses, 2, 6) for uses in range(20)]
    assert kept == [0, 1, 2, 3, 4, 5, 6, 7, 2, 3, 4, 5, 6, 7, 2, 3, 4, 5, 6, 7]


def test_older_turns_too_small_to_matter_are_not_summarised(tmp_path: Path) -> None:
    # the prompt is past the trigger, but not for its older turns (the first message, or
    # the system prompt, is most of it): a summary would gain nothing, turn after turn
    script = [*writes("a.txt", "b.txt", "c.txt", read=5_000, chars=10), text("Done.")]
    llm = ScriptedLLM(script)
    services = MemoryServices(llm, tmp_path)
    ctx = agent_context(services, settings=Settings(**SMALL_CONTEXT))
    assert run_agent(ctx, agent_node(), SPEC, builtin_registry().tools) == "Done."
    assert all(request.system != SUMMARY_SYSTEM for request in llm.requests)
