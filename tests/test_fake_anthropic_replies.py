"""What the fake Anthropic API plays and counts: prompt caching, count_tokens, every stop
reason, thinking blocks, and the error an unscripted request gets. Driven through the real
``anthropic`` SDK, as the code under test would drive it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from anthropic.types import RedactedThinkingBlock, ThinkingBlock, ToolUseBlock
from pydantic import SecretStr

from dagwright.errors import LLMRequestError
from dagwright.llm import LLMRequest
from dagwright.llm.anthropic import AnthropicLLM
from dagwright.settings import Settings
from dagwright.testing import FakeAnthropicServer, Script
from dagwright.testing.fake_anthropic_tokens import (
    PromptBlock,
    PromptCache,
    count_input_tokens,
    prompt_blocks,
)

MODEL = "claude-sonnet-4-6"  # caches prefixes from 2048 tokens on
LONG_TEXT = "The same long instructions, word for word. " * 240  # about 2600 tokens
OK = {"reply": {"content": [{"type": "text", "text": "ok"}]}}


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def cached_system(text: str = LONG_TEXT, ttl: str | None = None) -> list[dict[str, Any]]:
    cache_control = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    return [{"type": "text", "text": text, "cache_control": cache_control}]


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer(Script.model_validate({"default": OK})) as fake:
        yield fake


@pytest.fixture
def client(server: FakeAnthropicServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(api_key="sk-test", base_url=server.base_url, max_retries=0) as sdk:
        yield sdk


def ask(client: anthropic.Anthropic, question: str = "hi", **overrides: Any) -> Any:
    request: dict[str, Any] = {"model": MODEL, "max_tokens": 256, "messages": [user(question)]}
    return client.messages.create(**{**request, **overrides})


# Token counts and prompt caching


def test_input_tokens_are_about_a_quarter_of_the_json_sent(client: anthropic.Anthropic) -> None:
    tools = [{"name": "search", "description": "Search. " * 50, "input_schema": {"type": "object"}}]
    message = ask(client, "x" * 400, system="y" * 400, tools=tools)

    sent = json.dumps(tools) + "y" * 400 + "x" * 400
    assert len(sent) // 5 <= message.usage.input_tokens <= len(sent) // 3
    assert message.usage.cache_read_input_tokens == message.usage.cache_creation_input_tokens == 0


def test_a_repeated_cached_prefix_is_written_once_then_read(client: anthropic.Anthropic) -> None:
    first = ask(client, "first question", system=cached_system())
    second = ask(client, "a different second question", system=cached_system())

    written = first.usage.cache_creation_input_tokens
    assert written >= 1024 and first.usage.cache_read_input_tokens == 0
    assert first.usage.cache_creation.ephemeral_5m_input_tokens == written
    assert second.usage.cache_read_input_tokens == written
    assert second.usage.cache_creation_input_tokens == 0
    assert 1 <= second.usage.input_tokens < 20  # only the uncached question
    assert second.usage.input_tokens > first.usage.input_tokens  # a longer question


def test_the_total_input_is_the_same_cached_or_not(client: anthropic.Anthropic) -> None:
    counted = client.messages.count_tokens(
        model=MODEL, system=cached_system(), messages=[user("hi")]
    )
    for _ in range(2):
        usage = ask(client, system=cached_system()).usage
        total = usage.input_tokens + usage.cache_creation_input_tokens
        assert total + usage.cache_read_input_tokens == counted.input_tokens


def test_a_one_hour_breakpoint_is_reported_as_such(client: anthropic.Anthropic) -> None:
    usage = ask(client, system=cached_system(ttl="1h")).usage

    assert usage.cache_creation is not None
    assert usage.cache_creation.ephemeral_1h_input_tokens == usage.cache_creation_input_tokens > 0
    assert usage.cache_creation.ephemeral_5m_input_tokens == 0


@pytest.mark.parametrize(
    "second",
    [
        {"system": cached_system(LONG_TEXT + " Changed.")},  # another prefix
        {"system": cached_system(), "model": "claude-opus-4-6"},  # another model's cache
    ],
)
def test_a_different_prefix_or_model_misses(
    client: anthropic.Anthropic, second: dict[str, Any]
) -> None:
    ask(client, system=cached_system())

    usage = ask(client, **second).usage

    assert usage.cache_read_input_tokens == 0


def test_a_prefix_under_the_minimum_is_not_cached(client: anthropic.Anthropic) -> None:
    for _ in range(2):
        usage = ask(client, system=cached_system("Short and sweet.")).usage
        assert usage.cache_creation_input_tokens == usage.cache_read_input_tokens == 0


def test_a_cached_prefix_expires_after_its_ttl() -> None:
    now = [0.0]
    cache = PromptCache(clock=lambda: now[0])
    body = {"model": MODEL, "system": cached_system(), "messages": [user("hi")]}
    blocks = prompt_blocks(body)

    written = cache.account(MODEL, blocks).cache_creation_input_tokens
    now[0] = 299.0  # a read within the 5 minutes refreshes them
    assert cache.account(MODEL, blocks).cache_read_input_tokens == written
    now[0] = 299.0 + 301.0
    assert cache.account(MODEL, blocks).cache_read_input_tokens == 0


LOOKBACK_MODEL = "claude-sonnet-5-5"  # caches prefixes from 4096 tokens on
SHARED = "A long shared background, word for word. " * 500  # about 5,000 tokens


def blocks_after_shared(count: int) -> list[PromptBlock]:
    """A request: SHARED as its system (no breakpoint), then ``count`` text blocks, the
    last a breakpoint."""
    content: list[dict[str, Any]] = [{"type": "text", "text": f"turn {n}"} for n in range(count)]
    content[-1]["cache_control"] = {"type": "ephemeral"}
    body = {"model": LOOKBACK_MODEL, "system": SHARED, "messages": [user(content)]}
    return prompt_blocks(body)


@pytest.mark.parametrize(("blocks", "read"), [(19, True), (20, False)])
def test_a_breakpoint_reads_a_prefix_written_up_to_20_blocks_before_it(
    blocks: int, read: bool
) -> None:
    cache = PromptCache()
    first = {"model": LOOKBACK_MODEL, "system": cached_system(SHARED), "messages": [user("hi")]}
    written = cache.account(LOOKBACK_MODEL, prompt_blocks(first)).cache_creation_input_tokens
    assert written >= 4096

    usage = cache.account(LOOKBACK_MODEL, blocks_after_shared(blocks))

    assert usage.cache_read_input_tokens == (written if read else 0)


def test_a_breakpoint_is_not_counted_as_input() -> None:
    marked = {"model": MODEL, "system": cached_system(), "messages": [user("hi")]}
    bare = {"model": MODEL, "system": LONG_TEXT, "messages": [user("hi")]}
    assert count_input_tokens(marked) == count_input_tokens(bare)


def test_count_tokens_validates_and_plays_nothing(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    counted = client.messages.count_tokens(model=MODEL, messages=[user("x" * 400)])
    assert 95 <= counted.input_tokens <= 130

    with pytest.raises(anthropic.NotFoundError):
        client.messages.count_tokens(model="claude-test", messages=[user("hi")])
    orphan = [user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}])]
    with pytest.raises(anthropic.BadRequestError, match="unexpected `tool_use_id`"):
        client.messages.count_tokens(model=MODEL, messages=orphan)
    assert [request.answered_by for request in server.token_counts] == [
        "count_tokens",
        "rejected",
        "rejected",
    ]
    assert server.requests == []  # no Messages call


# Stop reasons and content


def play(server: FakeAnthropicServer, client: anthropic.Anthropic, reply: dict[str, Any]) -> Any:
    server.add({"reply": reply})
    return ask(client, tools=[{"name": "search", "input_schema": {"type": "object"}}])


@pytest.mark.parametrize(
    "stop_reason", ["end_turn", "pause_turn", "refusal", "model_context_window_exceeded"]
)
def test_each_stop_reason_can_be_played(
    server: FakeAnthropicServer, client: anthropic.Anthropic, stop_reason: str
) -> None:
    message = play(server, client, {"content": [], "stop_reason": stop_reason})

    assert (message.content, message.stop_reason) == ([], stop_reason)


def test_an_empty_end_turn_is_the_default_for_empty_content(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    message = play(server, client, {"content": []})

    assert (message.content, message.stop_reason) == ([], "end_turn")


def test_a_stop_sequence_is_reported(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    reply = {"content": [{"type": "text", "text": "1, 2"}], "stop_reason": "stop_sequence"}
    message = play(server, client, {**reply, "stop_sequence": "###"})

    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", "###")


def test_max_tokens_can_cut_a_tool_call(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    call = {"type": "tool_use", "name": "search", "input": {"q": "par"}}
    message = play(server, client, {"content": [call], "stop_reason": "max_tokens"})

    assert message.stop_reason == "max_tokens"
    assert isinstance(message.content[0], ToolUseBlock)
    assert message.usage.output_tokens == 256  # every token it was allowed


def test_a_tool_call_stops_for_tool_use(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    call = {"type": "tool_use", "name": "search", "input": {}}
    assert play(server, client, {"content": [call]}).stop_reason == "tool_use"


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ({"content": [], "stop_reason": "tool_use"}, "stop_reason tool_use needs a tool_use"),
        ({"content": [], "stop_reason": "stop_sequence"}, "needs the stop_sequence"),
    ],
)
def test_a_stop_reason_its_content_contradicts_is_a_script_error(
    reply: dict[str, Any], error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        Script.model_validate({"entries": [{"reply": reply}]})


def test_thinking_blocks_are_played_with_signatures(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.add(
        {
            "reply": {
                "content": [
                    {"type": "thinking", "thinking": "Weigh it up."},
                    {"type": "thinking", "thinking": "Again.", "signature": "sig-mine"},
                    {"type": "redacted_thinking", "data": "EncryptedBytes"},
                    {"type": "text", "text": "Done."},
                ]
            }
        }
    )

    message = ask(client, thinking={"type": "enabled", "budget_tokens": 1024}, max_tokens=4096)

    first, second, redacted, _ = message.content
    assert isinstance(first, ThinkingBlock) and first.signature.startswith("sig_")
    assert isinstance(second, ThinkingBlock) and second.signature == "sig-mine"
    assert isinstance(redacted, RedactedThinkingBlock) and redacted.data == "EncryptedBytes"
    assert message.stop_reason == "end_turn"


# An unscripted request


def test_an_unscripted_request_is_a_permanent_error_that_names_it() -> None:
    with FakeAnthropicServer() as server:
        settings = Settings(anthropic_base_url=server.base_url, anthropic_api_key=SecretStr("k"))
        llm = AnthropicLLM(settings.llm)
        request = LLMRequest(model=MODEL, system="s", messages=[user("what now?")])

        with pytest.raises(LLMRequestError, match="no script entry matches") as caught:
            llm.complete(request)

        assert "last_user='what now?'" in str(caught.value)
        assert len(server.requests) == 1  # refused at once: not retried
        assert server.requests[0].answered_by == "no_match"
