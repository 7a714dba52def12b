"""Defaults for thinking models, on a real worker against the strict fake Messages API: a
built-in agent asks for room to think and an effort, a text answer cut at ``max_tokens``
is continued rather than written again, and a cut tool call is retried once with more
room, then fails saying what the cut answers cost. The fake bills a cut answer its whole
``max_tokens``, as the API does."""

from __future__ import annotations

from typing import Any

import pytest

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.testing import FakeAnthropicServer
from dagwright.testing.fake_anthropic_script import text_of
from dagwright.workers.agent_loop import CONTINUE
from dagwright.workers.builtin_agents import THINKING_ROOM
from tests.support.llm_script import RESEARCHER, text, write

pytestmark = pytest.mark.usefixtures("worker")

ROOM = THINKING_ROOM["researcher"]["max_tokens"]


def says(messages: int, *blocks: dict[str, Any], cut: bool = False) -> dict[str, Any]:
    reply: dict[str, Any] = {"content": list(blocks)}
    if cut:
        reply["stop_reason"] = "max_tokens"
    return {"match": {"system_contains": RESEARCHER, "messages_count": messages}, "reply": reply}


def one_researcher() -> PlanBuilder:
    plan = PlanBuilder("Write the notes")
    plan.agent("research", "researcher", "Write notes.md, then say what is in it.")
    return plan


def llm_calls(client: Client, run_id: str) -> list[dict[str, Any]]:
    return [e.typed_data() for e in client.events(run_id, follow=False) if e.kind == "llm.call"]


def test_a_cut_tool_call_is_retried_once_larger_and_a_cut_text_answer_continued(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        says(1, text("Writing the notes."), write("notes.md"), cut=True),
        says(1, write("notes.md")),
        says(3, text("The notes hold "), cut=True),
        says(5, text("one line.")),
    )
    handle = client.submit(one_researcher().build())
    state = handle.wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, state.nodes["research"].error
    assert state.nodes["research"].output == "The notes hold one line."
    bodies = [r.body for r in fake_llm.requests]
    assert [b["max_tokens"] for b in bodies] == [ROOM, 2 * ROOM, 2 * ROOM, 2 * ROOM]
    assert bodies[0]["output_config"] == {"effort": "medium"}
    continued = bodies[3]["messages"]
    assert continued[-2]["role"] == "assistant"  # the cut text, sent back as it came
    assert continued[-1]["role"] == "user" and text_of(continued[-1]["content"]) == CONTINUE
    calls = llm_calls(client, handle.run_id)
    assert [c["stop_reason"] for c in calls] == ["max_tokens", "tool_use", "max_tokens", "end_turn"]
    spent = [c["output_tokens"] for c in calls]
    assert spent[0] == ROOM and spent[2] == 2 * ROOM  # a cut answer is billed whole
    assert state.nodes["research"].usage.output_tokens == sum(spent)
    print(f"\ncut tool call then cut text: output tokens per call {spent}, {sum(spent):,} in all")


def test_a_tool_call_cut_again_fails_after_one_retry_showing_its_spend(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add({**says(1, write("notes.md"), cut=True), "times": 5})
    handle = client.submit(one_researcher().build())
    state = handle.wait(timeout=60)
    assert state.status == RunStatus.FAILED
    error = state.nodes["research"].error
    assert error is not None and error.error_class == "AgentOutputError"
    spent = ROOM + 2 * ROOM
    assert f"{spent:,} output tokens spent on cut answers" in error.message
    assert [r.body["max_tokens"] for r in fake_llm.requests] == [ROOM, 2 * ROOM]
    calls = llm_calls(client, handle.run_id)
    assert [(c["stop_reason"], c["output_tokens"]) for c in calls] == [
        ("max_tokens", ROOM),
        ("max_tokens", 2 * ROOM),
    ]
    assert state.nodes["research"].attempts == 1  # permanent: no attempt repeats it
    print(
        f"\ncut twice: {spent:,} output tokens, ${state.usage.cost_usd:.2f}, then {error.message}"
    )
