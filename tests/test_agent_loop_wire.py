"""The agent loop's requests as the real API would judge them: the real SDK, dagwright's
Anthropic adapter and the strict fake Messages API, with in-memory services (no Redis)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr

from dagwright.llm.anthropic import AnthropicLLM
from dagwright.settings import Settings
from dagwright.testing import FakeAnthropicServer, Script
from dagwright.workers import builtin_registry
from dagwright.workers.agent_loop import AgentSpec, run_agent
from dagwright.workers.tools.policy import ToolPolicy
from tests.support.agents import MemoryServices, agent_context, agent_node


class Verdict(BaseModel):
    approved: bool


SPEC = AgentSpec(
    name="tester",
    description="test agent",
    system_prompt="You test.",
    tools=("read_input",),
    policy=ToolPolicy.allowing("read_input"),
    model="claude-sonnet-4-6",
)


def run_against(script: dict[str, Any], tmp_path: Path, spec: AgentSpec) -> tuple[Any, list[Any]]:
    with FakeAnthropicServer(Script.model_validate(script)) as server:
        settings = Settings(anthropic_base_url=server.base_url, anthropic_api_key=SecretStr("k"))
        services = MemoryServices(AnthropicLLM(settings.llm), tmp_path)
        context = agent_context(services, inputs={"facts": {"answer": 42}})
        output = run_agent(context, agent_node(), spec, builtin_registry().tools)
        return output, server.requests


def test_a_tool_loop_is_a_conversation_the_api_takes(tmp_path: Path) -> None:
    script = {
        "entries": [
            {
                "reply": {
                    "content": [
                        {"type": "text", "text": "Reading."},
                        {"type": "tool_use", "name": "read_input", "input": {"node": "facts"}},
                    ]
                }
            },
            {"reply": {"content": [{"type": "text", "text": "It is 42."}]}},
        ]
    }

    output, requests = run_against(script, tmp_path, SPEC)

    assert output == "It is 42."
    assert [request.answered_by for request in requests] == ["entry", "entry"]


def test_an_empty_answer_before_a_structured_one_is_sent_back_acceptably(tmp_path: Path) -> None:
    spec = dataclasses.replace(SPEC, output_model=Verdict)
    final = {"type": "tool_use", "name": "final_answer", "input": {"approved": True}}
    script = {"entries": [{"reply": {"content": []}}, {"reply": {"content": [final]}}]}

    output, requests = run_against(script, tmp_path, spec)

    assert output == {"approved": True}
    assert [request.status for request in requests] == [200, 200]


def test_a_tool_call_cut_at_max_tokens_is_not_run_and_the_turn_is_asked_again(
    tmp_path: Path,
) -> None:
    cut = {"type": "tool_use", "name": "read_input", "input": {"node": "facts"}}
    script = {
        "entries": [{"reply": {"content": [cut], "stop_reason": "max_tokens"}}],
        "default": {"reply": {"content": [{"type": "text", "text": "It is 42."}]}},
    }

    output, requests = run_against(script, tmp_path, SPEC)

    assert output == "It is 42."
    first, again = (request.body for request in requests)
    assert again["messages"] == first["messages"]  # the cut call was neither kept nor run
    assert again["max_tokens"] == 2 * first["max_tokens"]
