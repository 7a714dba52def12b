"""Every stop_reason of the Messages API, as the agent loop meets it (scripted LLM, memory
services): what is run, what is sent back, and which answers fail the node for good."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from dagwright.errors import AgentOutputError, NodeLostError
from dagwright.llm.protocol import LLMRequest
from dagwright.settings import Settings
from dagwright.testing.scripted import ScriptedLLM, reply, text, text_block, tool_use_block
from dagwright.workers import builtin_registry
from dagwright.workers.agent_loop import CONTINUE, NUDGE, AgentSpec, run_agent
from dagwright.workers.tools.policy import ToolPolicy
from tests.support.agents import MemoryServices, agent_context, agent_node

SPEC = AgentSpec(
    name="tester",
    description="test agent",
    system_prompt="You test.",
    tools=("workspace_write",),
    policy=ToolPolicy.allowing("workspace_write"),
    model="claude-test",
    max_tokens=1000,
)
THINKING = {"type": "thinking", "thinking": "Write it down first.", "signature": "c2lnbmVk"}


class Verdict(BaseModel):
    approved: bool


def run(
    script: list[Any], tmp_path: Path, spec: AgentSpec = SPEC, **settings: Any
) -> tuple[Any, ScriptedLLM, MemoryServices]:
    llm = ScriptedLLM(script)
    services = MemoryServices(llm, tmp_path)
    ctx = agent_context(services, settings=Settings(**settings))
    output = run_agent(ctx, agent_node(), spec, builtin_registry().tools)
    return output, llm, services


def assert_nothing_empty(requests: list[LLMRequest]) -> None:
    """What the real API refuses: a message with no content, an empty text block."""
    for request in requests:
        for message in request.messages:
            content = message["content"]
            assert content, f"empty {message['role']} message in {request.messages}"
            if isinstance(content, list):
                for block in content:
                    assert block.get("type") != "text" or block["text"].strip(), block


def write_call() -> dict[str, Any]:
    return tool_use_block("workspace_write", {"path": "a.txt", "content": "x"})


def test_a_tool_call_cut_at_max_tokens_is_never_run_and_the_turn_is_retried_larger(
    tmp_path: Path,
) -> None:
    truncated = reply(text_block("Writing."), write_call(), stop_reason="max_tokens")
    output, llm, services = run([truncated, text("Done.")], tmp_path)
    assert output == "Done."
    assert not (tmp_path / "run1" / "a.txt").exists()  # the cut call did not run
    assert [r.max_tokens for r in llm.requests] == [1000, 2000]
    assert llm.requests[1].messages == llm.requests[0].messages  # the cut answer was dropped
    assert services.usage.llm_calls == 2  # and still paid for
    assert_nothing_empty(llm.requests)


def test_a_tool_call_cut_twice_fails_after_one_retry_naming_what_it_spent(
    tmp_path: Path,
) -> None:
    # 4k, 8k, 16k and 32k before failing (61,440 output tokens) was the old way
    cut = [reply(write_call(), stop_reason="max_tokens", output_tokens=1000) for _ in range(3)]
    with pytest.raises(
        AgentOutputError,
        match=r"cut at max_tokens \(2000\).*after one retry.*2,000 output tokens spent",
    ) as failed:
        run(cut, tmp_path)
    assert "llm_max_tokens_cap" not in str(failed.value)
    assert not (tmp_path / "run1" / "a.txt").exists()


def test_a_cut_tool_call_is_not_retried_past_the_cap(tmp_path: Path) -> None:
    cut = [reply(write_call(), stop_reason="max_tokens") for _ in range(2)]
    with pytest.raises(AgentOutputError, match=r"cut at max_tokens \(1000\).*llm_max_tokens_cap"):
        run(cut, tmp_path, llm_max_tokens_cap=1000)


def test_a_cut_text_answer_is_continued_not_regenerated(tmp_path: Path) -> None:
    cut = reply(THINKING, text_block("The first half, "), stop_reason="max_tokens")
    output, llm, _ = run([cut, text("and the second half.")], tmp_path)
    assert output == "The first half, and the second half."
    assert [r.max_tokens for r in llm.requests] == [1000, 1000]  # no more room asked
    sent = llm.requests[1].messages
    assert sent[-2] == {"role": "assistant", "content": [THINKING, text_block("The first half, ")]}
    assert sent[-1] == {"role": "user", "content": CONTINUE}  # the API takes no prefill
    assert_nothing_empty(llm.requests)


def test_a_text_answer_continued_too_often_fails(tmp_path: Path) -> None:
    cuts = [reply(text_block(f"part {n} "), stop_reason="max_tokens") for n in range(5)]
    with pytest.raises(AgentOutputError, match=r"cut at max_tokens"):
        run([*cuts, write_call_reply()], tmp_path)


def test_a_resumed_loop_keeps_the_cut_text_and_the_raised_max_tokens(tmp_path: Path) -> None:
    first = ScriptedLLM(
        [
            reply(write_call(), stop_reason="max_tokens"),
            reply(text_block("ha"), stop_reason="max_tokens"),
            NodeLostError("x"),
        ]
    )
    crashed = MemoryServices(first, tmp_path)
    with pytest.raises(NodeLostError):
        run_agent(agent_context(crashed), agent_node(), SPEC, builtin_registry().tools)
    second = ScriptedLLM([text("ha!")])
    resumed = MemoryServices(second, tmp_path)
    ctx = agent_context(resumed, checkpoint=crashed.checkpoints[-1])
    assert run_agent(ctx, agent_node(), SPEC, builtin_registry().tools) == "haha!"
    assert second.requests[0].max_tokens == 2000
    assert len(first.requests) == 3 and len(second.requests) == 1  # nothing made twice


def test_a_paused_turn_is_sent_back_as_it_is_and_continues(tmp_path: Path) -> None:
    paused = reply(text_block("Searching the web..."), stop_reason="pause_turn")
    output, llm, _ = run([paused, text("Found it.")], tmp_path)
    assert output == "Found it."
    assert llm.requests[1].messages[-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Searching the web..."}],
    }
    assert_nothing_empty(llm.requests)


def test_an_empty_end_turn_gets_one_nudge(tmp_path: Path) -> None:
    output, llm, _ = run([write_call_reply(), reply(), text("All written.")], tmp_path)
    assert output == "All written."
    last = llm.requests[2].messages[-1]
    assert last["role"] == "user" and last["content"][-1] == {"type": "text", "text": NUDGE}
    assert last["content"][0]["type"] == "tool_result"
    assert_nothing_empty(llm.requests)


def test_a_second_empty_answer_fails_clearly(tmp_path: Path) -> None:
    empty_text = reply(text_block(""))  # an empty text block is no answer either
    with pytest.raises(AgentOutputError, match="gave no answer, even when asked again"):
        run([write_call_reply(), reply(), empty_text], tmp_path)


def test_a_structured_agent_never_sends_an_empty_assistant_turn(tmp_path: Path) -> None:
    spec = dataclasses.replace(SPEC, output_model=Verdict)
    script = [reply(), reply(tool_use_block("final_answer", {"approved": True}))]
    output, llm, _ = run(script, tmp_path, spec=spec)
    assert output == {"approved": True}
    assert [m["role"] for m in llm.requests[1].messages] == ["user"]
    assert_nothing_empty(llm.requests)


def test_the_context_window_filling_up_is_a_permanent_error(tmp_path: Path) -> None:
    full = reply(text_block("I was"), stop_reason="model_context_window_exceeded")
    with pytest.raises(AgentOutputError, match="filled the context window of claude-test"):
        run([full], tmp_path)


def test_a_refusal_without_a_fallback_fails_permanently(tmp_path: Path) -> None:
    with pytest.raises(AgentOutputError, match=r"refused to answer.*llm_refusal_fallback_model"):
        run([reply(stop_reason="refusal")], tmp_path)


def test_a_refusal_falls_back_to_the_configured_model(tmp_path: Path) -> None:
    refused = reply(text_block("I can't"), stop_reason="refusal")
    output, llm, _ = run(
        [refused, text("Here.")], tmp_path, llm_refusal_fallback_model="claude-haiku-5-5"
    )
    assert output == "Here."
    assert [r.model for r in llm.requests] == ["claude-test", "claude-haiku-5-5"]
    assert llm.requests[1].messages == llm.requests[0].messages  # the refusal is not kept


def test_an_agent_types_fallback_wins_and_is_not_retried_when_it_refuses_too(
    tmp_path: Path,
) -> None:
    spec = dataclasses.replace(SPEC, fallback_model="claude-opus-5-5")
    refusals = [reply(stop_reason="refusal"), reply(stop_reason="refusal")]
    with pytest.raises(AgentOutputError, match=r"\(claude-opus-5-5\) refused"):
        run(refusals, tmp_path, spec=spec, llm_refusal_fallback_model="claude-haiku-5-5")


def test_thinking_blocks_go_back_unchanged_before_the_tool_results(tmp_path: Path) -> None:
    spec = dataclasses.replace(SPEC, thinking={"type": "adaptive"}, effort="high")
    call = write_call()
    output, llm, _ = run([reply(dict(THINKING), call), text("Saved.")], tmp_path, spec=spec)
    assert output == "Saved."
    assistant = llm.requests[1].messages[1]
    assert assistant == {"role": "assistant", "content": [THINKING, call]}
    assert llm.requests[0].thinking == {"type": "adaptive"} and llm.requests[0].effort == "high"


def write_call_reply() -> Any:
    return reply(write_call())


def test_a_checkpoint_written_before_these_fields_existed_resumes(tmp_path: Path) -> None:
    call = write_call()
    old = {  # an AgentState as checkpointed before max_tokens, model and nudged
        "messages": [
            {"role": "user", "content": "Do the task."},
            {"role": "assistant", "content": [call]},
        ],
        "turn": 1,
        "pending": [call],
        "results": [],
        "last_call_tokens": 15,
    }
    llm = ScriptedLLM([text("Resumed.")])
    services = MemoryServices(llm, tmp_path)
    ctx = agent_context(services, checkpoint=old)
    assert run_agent(ctx, agent_node(), SPEC, builtin_registry().tools) == "Resumed."
    assert llm.requests[0].max_tokens == 1000 and llm.requests[0].model == "claude-test"
    assert llm.requests[0].prompt_cache_ttl == "5m"
