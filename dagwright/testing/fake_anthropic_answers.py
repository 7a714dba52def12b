"""What the fake Anthropic API sends: the bytes of a scripted reply, error or broken body.

A reply is built as the API's ``message`` dict first (:func:`message_of`) and only then
serialized, so a streaming writer can turn the same dict into events instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from dagwright.llm.protocol import rough_tokens
from dagwright.testing.fake_anthropic_script import Reply, ScriptEntry
from dagwright.testing.fake_anthropic_server_tools import (
    RESULT_TYPES,
    max_uses,
    over_max_uses,
    server_result_block,
    server_tool_usage,
)
from dagwright.testing.fake_anthropic_stream import StreamPlay, stream_play_for
from dagwright.testing.fake_anthropic_tokens import InputUsage

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class Answer:
    """An HTTP response to send, after waiting ``delay_s``."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    stream: StreamPlay | None = None  # the body is a message to send as an event stream


class IdMint:
    """Counters behind ``msg_<n>``, ``toolu_<n>``, ``sig_<n>`` and ``req_<n>`` ids; not
    thread-safe."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def next(self, prefix: str) -> str:
        self._counts[prefix] = self._counts.get(prefix, 0) + 1
        return f"{prefix}_{self._counts[prefix]}"


def entry_answer(
    entry: ScriptEntry,
    request: Mapping[str, Any],
    ids: IdMint,
    input_usage: InputUsage,
    context_management: dict[str, Any] | None = None,
) -> Answer:
    """What ``entry`` answers to a (valid) request body, its own headers winning;
    ``context_management``: the edits applied, for a request that asked for them."""
    stream = None
    if entry.status is not None:
        answer = error_answer(ids, entry.status, f"fake-anthropic: scripted {entry.status}")
    elif entry.malformed is not None:
        answer = _malformed_answer(entry.malformed, request["model"], ids.next("req"))
    else:
        assert entry.reply is not None  # ScriptEntry's validator demands one of the three
        message = message_of(entry.reply, request, ids, input_usage)
        if context_management is not None:
            message["context_management"] = context_management
        answer = json_answer(200, message, ids.next("req"))
        stream = stream_play_for(request, entry.stream)
    headers = {**answer.headers, **{name.lower(): value for name, value in entry.headers.items()}}
    return Answer(answer.status, answer.body, headers, entry.delay_s, stream)


def error_answer(ids: IdMint, status: int, message: str, error_type: str | None = None) -> Answer:
    """The API's error answer for ``status``; a 429 says ``retry-after: 0``."""
    fallback_type = "api_error" if status >= 500 else "invalid_request_error"
    error_type = error_type or ERROR_TYPES.get(status, fallback_type)
    request_id = ids.next("req")
    body = {**error_body(error_type, message), "request_id": request_id}
    answer = json_answer(status, body, request_id)
    if status == 429:
        answer.headers["retry-after"] = "0"
    return answer


def error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def json_answer(status: int, payload: object, request_id: str | None = None) -> Answer:
    headers = {"content-type": "application/json"}
    if request_id is not None:
        headers["request-id"] = request_id
    return Answer(status, json.dumps(payload).encode(), headers)


def message_of(
    reply: Reply, request: Mapping[str, Any], ids: IdMint, input_usage: InputUsage
) -> dict[str, Any]:
    """The API's ``message`` object for a scripted reply."""
    content = api_blocks(reply, ids, paused_call(request), max_uses(request))
    calls_tool = any(block["type"] == "tool_use" for block in content)
    stop_reason = reply.stop_reason or ("tool_use" if calls_tool else "end_turn")
    return {
        "id": ids.next("msg"),
        "type": "message",
        "role": "assistant",
        "model": reply.model or request["model"],
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": reply.stop_sequence,
        "usage": _usage(reply, request, content, input_usage),
    }


def paused_call(request: Mapping[str, Any]) -> dict[str, Any] | None:
    """The server tool call a paused turn, sent back as the last message, ended with:
    the result the continuation plays answers it."""
    messages = request.get("messages") or []
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    content = last.get("content") if last.get("role") == "assistant" else None
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    calls = [block for block in blocks if block.get("type") == "server_tool_use"]
    return calls[-1] if calls else None


def api_blocks(
    reply: Reply,
    ids: IdMint,
    last_call: dict[str, Any] | None = None,
    limits: Mapping[str, int] | None = None,
) -> list[dict[str, Any]]:
    """The reply's content as the API's blocks: ids given, server tool results shaped
    (each answering the server tool call before it, or ``last_call``), and a call past
    its tool's ``max_uses`` (``limits``) answered ``max_uses_exceeded``, as the API does."""
    content: list[dict[str, Any]] = []
    calls: dict[str, int] = {}
    for scripted in reply.content:
        block = _with_ids(scripted.model_dump(exclude_none=True), ids)
        if block["type"] == "server_tool_use":
            last_call = block
            calls[block["name"]] = calls.get(block["name"], 0) + 1
        elif block["type"] in RESULT_TYPES:
            block = server_result_block(block, last_call)
            name = (last_call or {}).get("name", "")
            if calls.get(name, 0) > (limits or {}).get(name, calls.get(name, 0)):
                block = over_max_uses(block, block["tool_use_id"])
        content.append(block)
    return content


def _with_ids(block: dict[str, Any], ids: IdMint) -> dict[str, Any]:
    if block["type"] == "server_tool_use" and "id" not in block:
        block["id"] = ids.next("srvtoolu")
    if block["type"] == "tool_use" and "id" not in block:
        block["id"] = ids.next("toolu")
    if block["type"] == "thinking" and "signature" not in block:
        block["signature"] = ids.next("sig")
    return block


def _usage(
    reply: Reply, request: Mapping[str, Any], content: list[dict[str, Any]], input_usage: InputUsage
) -> dict[str, Any]:
    """The reply's usage: scripted counts win, the rest is the accounting's."""
    usage = input_usage.to_json()
    scripted = reply.usage.model_dump(exclude_none=True)
    usage.update(scripted)
    if "output_tokens" not in scripted:
        usage["output_tokens"] = _output_tokens(reply, request, content)
    servers = server_tool_usage(content)
    for name in servers:
        servers[name] = scripted.pop(name, servers[name])
        usage.pop(name, None)
    if any(servers.values()):
        usage["server_tool_use"] = servers
    return usage


def _output_tokens(reply: Reply, request: Mapping[str, Any], content: list[dict[str, Any]]) -> int:
    """Cut off at ``max_tokens``, the model wrote all of them; else its content's size."""
    if reply.stop_reason == "max_tokens":
        return int(request["max_tokens"])
    return max(1, rough_tokens("".join(_written(block) for block in content)))


def _written(block: dict[str, Any]) -> str:
    """What the model "wrote" in a block: its text, reasoning or tool input."""
    if block["type"] in ("tool_use", "server_tool_use"):
        return json.dumps(block["input"])
    if block["type"] in RESULT_TYPES:
        return ""  # the API's, not the model's
    return str(block.get("text") or block.get("thinking") or block.get("data") or "")


def _malformed_answer(kind: Literal["json", "schema"], model: str, request_id: str) -> Answer:
    if kind == "json":
        broken = b'{"id": "msg_broken", "type": "message", "content": [{"type": "text", "te'
        return Answer(200, broken, {"content-type": "application/json", "request-id": request_id})
    incomplete = {"id": "msg_broken", "type": "message", "role": "assistant", "model": model}
    return json_answer(200, incomplete, request_id)
