"""The fake Messages API's server-sent events, read off the wire (no SDK in between)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from dagwright.errors import ConfigurationError
from dagwright.testing import FakeAnthropicServer
from dagwright.testing.fake_anthropic_script import Script

BODY = {
    "model": "claude-sonnet-5-5",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "hi"}],
}
HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


def events_of(server: FakeAnthropicServer, body: dict[str, Any]) -> list[tuple[str, Any]]:
    response = httpx.post(f"{server.base_url}/v1/messages", json=body, headers=HEADERS)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = []
    for chunk in response.text.strip().split("\n\n"):
        name_line, data_line = chunk.split("\n")
        events.append((name_line.removeprefix("event: "), json.loads(data_line[len("data: ") :])))
    return events


def test_a_stream_request_gets_the_apis_event_sequence(fake_llm: FakeAnthropicServer) -> None:
    fake_llm.add(
        {
            "reply": {
                "content": [
                    {"type": "thinking", "thinking": "abcdef", "signature": "sig"},
                    {"type": "tool_use", "name": "t", "input": {"q": "xyz"}},
                ],
                "usage": {"input_tokens": 5, "output_tokens": 9},
            },
            "stream": {"chunk_chars": 4},
        }
    )
    events = events_of(fake_llm, {**BODY, "stream": True})
    names = [name for name, _ in events]
    assert names == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",  # the signature
        "content_block_stop",
        "content_block_start",
        *["content_block_delta"] * 3,  # '{"q": "xyz"}' in pieces of 4
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["usage"]["input_tokens"] == 5
    deltas = [data["delta"] for name, data in events if name == "content_block_delta"]
    assert [d["type"] for d in deltas[:3]] == [
        "thinking_delta",
        "thinking_delta",
        "signature_delta",
    ]
    assert "".join(d["partial_json"] for d in deltas[3:]) == '{"q": "xyz"}'
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert events[-2][1]["usage"] == {"output_tokens": 9}


def test_an_error_event_cuts_the_stream(fake_llm: FakeAnthropicServer) -> None:
    fake_llm.add(
        {"reply": {"content": [{"type": "text", "text": "x"}]}, "stream": {"error_after_events": 2}}
    )
    events = events_of(fake_llm, {**BODY, "stream": True})
    assert [name for name, _ in events] == ["message_start", "ping", "error"]
    assert events[-1][1]["error"]["type"] == "overloaded_error"


def test_a_request_without_stream_still_gets_json(fake_llm: FakeAnthropicServer) -> None:
    fake_llm.add({"reply": {"content": [{"type": "text", "text": "x"}]}, "stream": {}})
    response = httpx.post(f"{fake_llm.base_url}/v1/messages", json=BODY, headers=HEADERS)
    assert response.json()["content"] == [{"type": "text", "text": "x"}]


def test_scripts_load_stream_fields_and_refuse_unknown_ones(tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text(
        "entries:\n"
        "  - reply: {content: [{type: thinking, thinking: hm}, {type: text, text: hi}]}\n"
        "    stream: {event_delay_s: 0.5, chunk_chars: 8}\n"
    )
    entry = Script.load(path).entries[0]
    assert entry.stream is not None and entry.stream.event_delay_s == 0.5
    path.write_text("entries:\n  - reply: {content: []}\n    stream: {delay: 1}\n")
    with pytest.raises(ConfigurationError, match="delay"):
        Script.load(path)
