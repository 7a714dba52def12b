"""Streamed answers of the fake Anthropic API: a message played as server-sent events.

A request with ``"stream": true`` that a script answers with a reply gets
``text/event-stream`` with the real API's event sequence::

    message_start, ping,
    per content block: content_block_start, content_block_delta..., content_block_stop
        (citations_delta then text_delta for text, input_json_delta for a tool's or server
        tool's input, thinking_delta then signature_delta for thinking; a server tool's
        result comes whole in its start event),
    message_delta (stop_reason, output usage), message_stop

A script entry's ``stream`` field plays the awkward cases: a slow generation
(``event_delay_s`` between events, with deltas of ``chunk_chars`` characters), a long pause
kept alive by ``ping`` events (``ping_every_s``), a stalled one (a delay longer than the
client's idle timeout, without pings) and an ``overloaded_error`` event in the middle of
the stream (``error_after_events``). Error statuses and malformed answers
stay plain HTTP answers, as the real API sends them before any event.

The body goes out with chunked transfer encoding, one chunk per event, so every event
reaches the client when it is written (the SDK's idle timeout is a read timeout).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["StreamPlay", "message_events", "stream_play_for", "write_event_stream"]

Event = tuple[str, dict[str, Any]]


class StreamPlay(BaseModel):
    """How a streamed reply is played (a script entry's ``stream`` field)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    event_delay_s: float = Field(default=0.0, ge=0)
    """Seconds between two events: a slow generation, or a stalled one when longer than
    the client's idle timeout."""
    ping_every_s: float | None = Field(default=None, gt=0)
    """Send ``ping`` events this often during each delay, as the API does while the model
    works: a long pause that is alive, not stalled."""
    chunk_chars: int = Field(default=16, ge=1)
    """Characters per delta: text, thinking and tool input arrive in pieces this long."""
    error_after_events: int | None = Field(default=None, ge=1)
    """Send an ``overloaded_error`` event after this many events, and end the stream."""


def stream_play_for(request: Mapping[str, Any], play: StreamPlay | None) -> StreamPlay | None:
    """How to stream the reply to ``request``: None unless it asked for a stream."""
    if request.get("stream") is not True:
        return None
    return play if play is not None else StreamPlay()


def message_events(message: Mapping[str, Any], play: StreamPlay) -> Iterator[Event]:
    """The events that stream ``message`` (the API's ``message`` object)."""
    usage = message["usage"]
    started = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    started.pop("context_management", None)  # the API reports it in message_delta
    started["usage"] = {**usage, "output_tokens": 1}
    yield "message_start", {"type": "message_start", "message": started}
    yield "ping", {"type": "ping"}
    for index, block in enumerate(message["content"]):
        yield from _block_events(index, block, play.chunk_chars)
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": message["stop_reason"],
                "stop_sequence": message.get("stop_sequence"),
            },
            "usage": _final_usage(usage),
            **_context_management(message),
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _context_management(message: Mapping[str, Any]) -> dict[str, Any]:
    """``message_delta``'s ``context_management``, for a request that asked for it."""
    if "context_management" not in message:
        return {}
    return {"context_management": message["context_management"]}


def _final_usage(usage: Mapping[str, Any]) -> dict[str, Any]:
    """``message_delta``'s usage: the output tokens, and the server tool requests made."""
    final = {"output_tokens": usage["output_tokens"]}
    if "server_tool_use" in usage:
        final["server_tool_use"] = usage["server_tool_use"]
    return final


def _block_events(index: int, block: Mapping[str, Any], chunk_chars: int) -> Iterator[Event]:
    start, deltas = _block_start_and_deltas(block, chunk_chars)
    yield (
        "content_block_start",
        {
            "type": "content_block_start",
            "index": index,
            "content_block": start,
        },
    )
    for delta in deltas:
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


def _block_start_and_deltas(
    block: Mapping[str, Any], chunk_chars: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A block as it starts (empty) and the deltas that fill it."""
    kind = block["type"]
    if kind == "text":
        pieces = _pieces(block["text"], chunk_chars)
        cited = [{"type": "citations_delta", "citation": c} for c in block.get("citations") or []]
        deltas = [*cited, *({"type": "text_delta", "text": part} for part in pieces)]
        return {"type": "text", "text": ""}, deltas
    if kind in ("tool_use", "server_tool_use"):
        raw = json.dumps(block["input"])
        deltas = [
            {"type": "input_json_delta", "partial_json": part} for part in _pieces(raw, chunk_chars)
        ]
        return {"type": kind, "id": block["id"], "name": block["name"], "input": {}}, deltas
    if kind in ("web_search_tool_result", "web_fetch_tool_result"):
        return dict(block), []  # the API's result arrives whole, in its start event
    if kind == "thinking":
        pieces = _pieces(block["thinking"], chunk_chars)
        deltas = [{"type": "thinking_delta", "thinking": part} for part in pieces]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
        return {"type": "thinking", "thinking": "", "signature": ""}, deltas
    raise ValueError(f"fake-anthropic cannot stream a {kind!r} block")


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def overloaded_event() -> Event:
    error = {"type": "overloaded_error", "message": "Overloaded (fake-anthropic, mid-stream)"}
    return "error", {"type": "error", "error": error}


def played_events(message: Mapping[str, Any], play: StreamPlay) -> Iterator[Event]:
    """``message_events``, cut by an error event if the play says so."""
    for count, event in enumerate(message_events(message, play), start=1):
        yield event
        if play.error_after_events is not None and count >= play.error_after_events:
            yield overloaded_event()
            return


def write_event_stream(
    handler: BaseHTTPRequestHandler, body: bytes, headers: Mapping[str, str], play: StreamPlay
) -> None:
    """Send the message ``body`` (JSON) as an event stream, pausing between events.
    Raises OSError if the client left (it timed out, or closed the stream)."""
    handler.send_response(200, "OK")
    for name, value in headers.items():
        if name not in ("content-type", "content-length"):
            handler.send_header(name, value)
    handler.send_header("content-type", "text/event-stream; charset=utf-8")
    handler.send_header("cache-control", "no-cache")
    handler.send_header("transfer-encoding", "chunked")
    handler.end_headers()
    for number, (name, data) in enumerate(played_events(json.loads(body), play)):
        if number and play.event_delay_s:
            _pause(handler, play.event_delay_s, play.ping_every_s)
        _write_event(handler, name, data)
    _write_chunk(handler, b"")  # the zero-length chunk ends the body


def _pause(handler: BaseHTTPRequestHandler, seconds: float, ping_every_s: float | None) -> None:
    """Wait ``seconds``, pinging every ``ping_every_s`` meanwhile if given."""
    ends_at = time.monotonic() + seconds
    while (left := ends_at - time.monotonic()) > 0:
        if ping_every_s is None or left <= ping_every_s:
            time.sleep(left)
            return
        time.sleep(ping_every_s)
        _write_event(handler, "ping", {"type": "ping"})


def _write_event(handler: BaseHTTPRequestHandler, name: str, data: dict[str, Any]) -> None:
    _write_chunk(handler, f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())


def _write_chunk(handler: BaseHTTPRequestHandler, data: bytes) -> None:
    handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    handler.wfile.flush()
