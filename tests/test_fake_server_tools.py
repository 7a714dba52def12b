"""The fake Messages API's server tools (web search, web fetch), through the real SDK: it
takes the definitions the real API takes, refuses what it refuses, and plays a scripted
search or fetch (the call and its result in the assistant's content, ``pause_turn``,
``usage.server_tool_use``), streamed or not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from dagwright.testing import FakeAnthropicServer

MODEL = "claude-sonnet-5-5"
SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
FETCH = {"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 2}
SEARCHED = [
    {"type": "text", "text": "Let me search."},
    {"type": "server_tool_use", "name": "web_search", "input": {"query": "valkey license"}},
    {
        "type": "web_search_tool_result",
        "results": [{"url": "https://valkey.io/", "title": "Valkey", "page_age": "1 day"}],
    },
    {
        "type": "text",
        "text": "Valkey is BSD-licensed.",
        "citations": [
            {"url": "https://valkey.io/", "title": "Valkey", "cited_text": "BSD 3-Clause"}
        ],
    },
]


@pytest.fixture
def client(fake_llm: FakeAnthropicServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(api_key="k", base_url=fake_llm.base_url, max_retries=0) as sdk:
        yield sdk


def ask(client: anthropic.Anthropic, tools: list[dict[str, Any]], **extra: Any) -> Any:
    return client.messages.create(
        model=MODEL,
        max_tokens=1024,
        messages=extra.pop("messages", [{"role": "user", "content": "Which license?"}]),
        tools=tools,  # type: ignore[arg-type]
        **extra,
    )


def refusal(client: anthropic.Anthropic, tools: list[dict[str, Any]], **extra: Any) -> str:
    with pytest.raises(anthropic.BadRequestError) as caught:
        ask(client, tools, **extra)
    return caught.value.api_message or ""


@pytest.mark.parametrize(
    ("tool", "words"),
    [
        ({**SEARCH, "type": "web_search_20990101"}, "Input tag 'web_search_20990101'"),
        ({**SEARCH, "name": "search"}, "name: Input should be 'web_search'"),
        ({**SEARCH, "max_uses": 0}, "max_uses: Input should be greater than 0"),
        ({**FETCH, "max_uses": "5"}, "max_uses: Input should be a valid integer"),
        (
            {**SEARCH, "allowed_domains": ["a.org"], "blocked_domains": ["b.org"]},
            "only one of allowed_domains and blocked_domains",
        ),
        ({**FETCH, "allowed_domains": ["https://a.org"]}, "must not include a scheme"),
        ({**SEARCH, "citations": {"enabled": True}}, "citations: Extra inputs are not permitted"),
    ],
)
def test_server_tool_definitions_the_api_refuses(
    client: anthropic.Anthropic, fake_llm: FakeAnthropicServer, tool: dict[str, Any], words: str
) -> None:
    fake_llm.add({"reply": {"content": [{"type": "text", "text": "unused"}]}})
    assert words in refusal(client, [tool])


def test_a_scripted_search_plays_its_blocks_usage_and_citations(
    client: anthropic.Anthropic, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add({"reply": {"content": SEARCHED}})
    tools = [
        {**SEARCH, "allowed_domains": ["valkey.io"]},
        {**FETCH, "citations": {"enabled": True}},
    ]
    message = ask(client, tools)
    kinds = [block.type for block in message.content]
    assert kinds == ["text", "server_tool_use", "web_search_tool_result", "text"]
    call, found = message.content[1], message.content[2]
    assert call.name == "web_search" and found.tool_use_id == call.id
    assert found.content[0].url == "https://valkey.io/"
    assert message.content[3].citations[0].url == "https://valkey.io/"
    assert message.stop_reason == "end_turn"  # a server tool is no tool_use for the client
    assert message.usage.server_tool_use.web_search_requests == 1
    assert message.usage.server_tool_use.web_fetch_requests == 0


def test_a_streamed_search_then_a_fetch_assembles_as_the_sdk_expects(
    client: anthropic.Anthropic, fake_llm: FakeAnthropicServer
) -> None:
    fetched = [
        {"type": "server_tool_use", "name": "web_fetch", "input": {"url": "https://valkey.io/"}},
        {"type": "web_fetch_tool_result", "text": "Valkey: BSD 3-Clause.", "title": "Valkey"},
        {"type": "text", "text": "Confirmed."},
    ]
    fake_llm.add({"reply": {"content": SEARCHED[:3] + fetched}, "stream": {"chunk_chars": 4}})
    with client.messages.stream(
        model=MODEL,
        max_tokens=1024,
        messages=[{"role": "user", "content": "Which license?"}],
        tools=[SEARCH, FETCH],  # type: ignore[list-item]
    ) as stream:
        message = stream.get_final_message()
    assert [block.type for block in message.content] == [
        "text",
        "server_tool_use",
        "web_search_tool_result",
        "server_tool_use",
        "web_fetch_tool_result",
        "text",
    ]
    assert message.content[1].input == {"query": "valkey license"}
    page = message.content[4].content
    assert page.url == "https://valkey.io/" and page.content.source.data == "Valkey: BSD 3-Clause."
    counts = message.usage.server_tool_use
    assert (counts.web_search_requests, counts.web_fetch_requests) == (1, 1)


def test_a_paused_turn_goes_on_when_sent_back_and_results_must_stay(
    client: anthropic.Anthropic, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        {"reply": {"content": SEARCHED[:2], "stop_reason": "pause_turn"}},
        {"reply": {"content": SEARCHED[2:]}},
    )
    question = {"role": "user", "content": "Which license?"}
    paused = ask(client, [SEARCH], messages=[question])
    assert paused.stop_reason == "pause_turn"
    turn = [block.model_dump(exclude_none=True) for block in paused.content]
    # the paused turn, sent back as the last message, goes on
    resumed = ask(client, [SEARCH], messages=[question, {"role": "assistant", "content": turn}])
    assert resumed.content[-1].text == "Valkey is BSD-licensed."
    assert resumed.content[0].tool_use_id == paused.content[1].id  # answers the paused call
    # a finished turn whose search lost its result block is refused, as the API does
    dropped = [turn[0], turn[1]]
    later = [question, {"role": "assistant", "content": dropped}, {"role": "user", "content": "?"}]
    assert "`server_tool_use` ids were found without a result block" in refusal(
        client, [SEARCH], messages=later
    )


def test_a_server_tool_the_request_does_not_offer_is_not_played(
    client: anthropic.Anthropic, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add({"reply": {"content": SEARCHED}})
    assert "does not offer the web_search server tool" in refusal(client, [FETCH])


def test_a_search_past_max_uses_is_answered_max_uses_exceeded_and_not_billed(
    client: anthropic.Anthropic, fake_llm: FakeAnthropicServer
) -> None:
    twice = [*SEARCHED[1:3], *SEARCHED[1:3], SEARCHED[3]]
    fake_llm.add({"reply": {"content": twice}})
    message = ask(client, [{**SEARCH, "max_uses": 1}])
    first, second = message.content[1], message.content[3]
    assert first.content[0].url == "https://valkey.io/"
    assert second.content.error_code == "max_uses_exceeded"
    assert message.usage.server_tool_use.web_search_requests == 1


def test_a_citation_sent_back_without_its_title_is_refused(
    client: anthropic.Anthropic, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add({"reply": {"content": [{"type": "text", "text": "unused"}]}})
    citation = {
        "type": "web_search_result_location",
        "url": "https://valkey.io/",
        "cited_text": "BSD",
        "encrypted_index": "x",
    }  # no "title": the API requires the key, null or not
    turns = [
        {"role": "user", "content": "Which license?"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "BSD.", "citations": [citation]}],
        },
        {"role": "user", "content": "Sure?"},
    ]
    where = "messages.1.content.0.citations.0"
    assert refusal(client, [SEARCH], messages=turns) == (
        f"{where}.web_search_result_location.title: Field required"
    )
