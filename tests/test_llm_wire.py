"""The Messages API body of an LLMRequest: prompt-cache breakpoints, thinking, effort and
sampling parameters (pure: no HTTP)."""

from __future__ import annotations

from typing import Any

import pytest

from dagwright.llm.messages_api_rules import refuses_sampling
from dagwright.llm.prompt_caching import MAX_BREAKPOINTS, breakpoints
from dagwright.llm.protocol import LLMRequest
from dagwright.llm.wire import message_body

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


LONG = "You test. " * 2_000  # 20,000 characters: above any model's minimum cacheable length
RUN = "Today's date is 2026-11-28."


def request(messages: list[dict[str, Any]], **fields: Any) -> LLMRequest:
    defaults: dict[str, Any] = {
        "model": "claude-sonnet-5-5",
        "system": LONG,
        "run_system": RUN,
        "tools": TOOLS,
        "prompt_cache_ttl": "5m",
    }
    return LLMRequest(messages=messages, **{**defaults, **fields})


def test_breakpoints_on_the_type_prompt_the_runs_block_and_the_conversations_tail() -> None:
    body = message_body(request(conversation(0)))
    assert "cache_control" not in body["tools"][-1]  # read back only with the prompt after
    assert body["system"] == [
        {"type": "text", "text": LONG, "cache_control": EPHEMERAL},
        {"type": "text", "text": RUN, "cache_control": EPHEMERAL},
    ]
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


@pytest.mark.parametrize(
    ("model", "marked"),
    [("claude-sonnet-5-5", False), ("claude-opus-4-7", True), ("claude-opus-5", True)],
)
def test_no_breakpoint_where_the_prefix_is_under_the_models_minimum(
    model: str, marked: bool
) -> None:
    """About 3,000 tokens: under Sonnet 5.5's 4,096, above Opus 4.7's 2,048."""
    body = message_body(request(conversation(2), model=model, system="You test. " * 1_200))
    assert (breakpoints(body) > 0) is marked
    if not marked:
        assert body["system"][0] == {"type": "text", "text": "You test. " * 1_200}


def test_a_prefix_crossing_the_minimum_mid_conversation_is_marked_from_there() -> None:
    short = request(conversation(1), system="You test.")
    assert breakpoints(message_body(short)) == 0
    long_turns = conversation(1)
    long_turns[-1] = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t0", "content": "z" * 20_000}],
    }
    body = message_body(short.model_copy(update={"messages": long_turns}))
    assert body["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    assert breakpoints(body) == 1  # the system blocks and the previous tail are too short


def test_a_one_turn_node_writes_nothing_unless_the_runs_other_nodes_read_it() -> None:
    alone = message_body(request(conversation(0), cache_conversation=False))
    assert breakpoints(alone) == 0
    shared = message_body(request(conversation(0), cache_conversation=False, cache_run_prefix=True))
    assert [block.get("cache_control") for block in shared["system"]] == [EPHEMERAL] * 2
    assert shared["messages"] == conversation(0)  # its own message: read by no one


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
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    off = message_body(request(conversation(1), prompt_cache_ttl=None, run_system=None))
    assert off["system"] == LONG and breakpoints(off) == 0
    two_blocks = message_body(request(conversation(1), prompt_cache_ttl=None))
    assert two_blocks["system"] == [{"type": "text", "text": LONG}, {"type": "text", "text": RUN}]


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


FORCE_A = {"type": "tool", "name": "a", "disable_parallel_tool_use": True}


@pytest.mark.parametrize(
    ("model", "thinking", "sent"),
    [
        ("claude-sonnet-4-6", None, FORCE_A),  # takes forced tool use: sent as asked
        ("claude-sonnet-5", {"type": "disabled"}, FORCE_A),
        # refused from the 5.5 models on, and beside thinking on every model: auto instead
        ("claude-sonnet-5-5", None, {"type": "auto", "disable_parallel_tool_use": True}),
        ("claude-opus-5-5", None, {"type": "auto", "disable_parallel_tool_use": True}),
        (
            "claude-sonnet-4-6",
            {"type": "adaptive"},
            {"type": "auto", "disable_parallel_tool_use": True},
        ),
    ],
)
def test_forced_tool_use_goes_only_where_the_model_takes_it(
    model: str, thinking: dict[str, Any] | None, sent: dict[str, Any]
) -> None:
    body = message_body(request([], model=model, thinking=thinking, tool_choice=FORCE_A))
    assert body["tool_choice"] == sent


def test_tool_choice_is_sent_only_when_set_and_keys_the_response_cache_then() -> None:
    plain = request(conversation(0))
    assert "tool_choice" not in message_body(plain)
    assert "tool_choice" not in plain.canonical_json()  # the key cached answers have
    forced = plain.model_copy(update={"tool_choice": FORCE_A})
    auto = plain.model_copy(update={"tool_choice": {"type": "auto"}})
    assert len({plain.digest(), forced.digest(), auto.digest()}) == 3
