"""The Messages API body of an LLMRequest: prompt-cache breakpoints, thinking, effort and
sampling parameters (pure: no HTTP)."""

from __future__ import annotations

from typing import Any

import pytest

from dagwright.llm.messages_api_rules import refuses_sampling
from dagwright.llm.protocol import LLMRequest
from dagwright.llm.wire import MAX_BREAKPOINTS, breakpoints, message_body

TOOLS = [
    {"name": "a", "description": "A.", "input_schema": {"type": "object"}},
    {"name": "b", "description": "B.", "input_schema": {"type": "object"}},
]
EPHEMERAL = {"type": "ephemeral"}


def conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Do it."}]
    for n in range(turns):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "sig"},
                    {"type": "tool_use", "id": f"t{n}", "name": "a", "input": {}},
                ],
            }
        )
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}"}]}
        )
    return messages


def request(messages: list[dict[str, Any]], **fields: Any) -> LLMRequest:
    return LLMRequest(
        model="claude-sonnet-5-5",
        system="You test.",
        messages=messages,
        tools=TOOLS,
        **{"prompt_cache_ttl": "5m", **fields},
    )


def test_breakpoints_on_tools_system_and_the_conversations_tail() -> None:
    body = message_body(request(conversation(0)))
    assert body["tools"][-1]["cache_control"] == EPHEMERAL and "cache_control" not in TOOLS[-1]
    assert body["system"] == [{"type": "text", "text": "You test.", "cache_control": EPHEMERAL}]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Do it.", "cache_control": EPHEMERAL}],
        }
    ]
    assert breakpoints(body) == 3


@pytest.mark.parametrize("turns", [1, 2, 5])
def test_each_turn_marks_its_tail_and_the_previous_requests_tail(turns: int) -> None:
    messages = conversation(turns)
    body = message_body(request(messages))
    assert breakpoints(body) == MAX_BREAKPOINTS
    sent = body["messages"]
    assert sent[-1]["content"][-1]["cache_control"] == EPHEMERAL
    previous_tail = sent[-3]["content"]
    assert previous_tail[-1]["cache_control"] == EPHEMERAL
    assert all("cache_control" not in block for m in messages for block in m["content"])


def test_thinking_blocks_never_carry_a_breakpoint() -> None:
    messages = [
        *conversation(1),
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "so", "signature": "s2"},
                {"type": "text", "text": "Paused."},
            ],
        },
    ]
    body = message_body(request(messages))
    last = body["messages"][-1]["content"]
    assert "cache_control" not in last[0] and last[1]["cache_control"] == EPHEMERAL
    assert body["messages"][-2]["content"][0]["type"] == "tool_result"


def test_an_hour_ttl_and_no_caching() -> None:
    body = message_body(request(conversation(1), prompt_cache_ttl="1h"))
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    off = message_body(request(conversation(1), prompt_cache_ttl=None))
    assert off["system"] == "You test." and breakpoints(off) == 0


def test_thinking_and_effort_are_sent_as_the_api_names_them() -> None:
    body = message_body(request([], thinking={"type": "adaptive"}, effort="low"))
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"] == {"effort": "low"}


@pytest.mark.parametrize(
    ("model", "rejects"),
    [
        ("claude-opus-4-7", True),
        ("claude-sonnet-5-5", True),
        ("claude-opus-5", True),
        ("claude-haiku-5-5", True),
        ("claude-fable-5", True),
        ("claude-mythos-preview", True),
        ("claude-sonnet-4-6", False),
        ("claude-opus-4-6", False),
        ("claude-haiku-4-6", True),  # a Haiku from 4.6 on: the cutoff, not a list of ids
        ("claude-sonnet-4-20250514", False),
        ("claude-3-5-sonnet-20241022", False),
        ("scripted", False),
    ],
)
def test_which_models_reject_sampling_parameters(model: str, rejects: bool) -> None:
    assert refuses_sampling(model) is rejects
    body = message_body(LLMRequest(model=model, system="", messages=[], temperature=0.0))
    assert ("extra_body" in body) is not rejects
