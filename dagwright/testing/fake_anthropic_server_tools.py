"""The fake Anthropic API's server tools (web search, web fetch): what it refuses in their
definitions and in a conversation that carries them, and how it plays them.

The real API runs a server tool inside the call: the assistant's content holds the
model's ``server_tool_use`` block and, right after it, the API's result block
(``web_search_tool_result`` / ``web_fetch_tool_result``); ``usage.server_tool_use``
counts the requests. A turn that stops at ``pause_turn`` may end with a call whose
result has not come yet; sent back as the last (assistant) message, the API goes on.
The client answers no server tool with a ``tool_result``: the results come back in the
next request exactly as they came.

Rules on definitions, worded as the API's pydantic errors: a ``type`` that is no version
the API knows, a ``name`` other than the tool's, an unknown field, ``max_uses`` below 1,
``allowed_domains`` with ``blocked_domains``, a domain given as a URL.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagwright.llm import messages_api_rules as api

SERVER_TOOL_RESULT_TYPES = {
    "web_search": "web_search_tool_result",
    "web_fetch": "web_fetch_tool_result",
}
RESULT_TYPES = frozenset(SERVER_TOOL_RESULT_TYPES.values())
CUSTOM_TOOL_TYPES = ("custom", "memory_20250818")


def server_tool_problem(i: int, tool: Mapping[str, Any]) -> str | None:
    """What the API refuses in ``tools[i]``, a tool with a ``type`` other than custom."""
    tool_type = str(tool.get("type"))
    name = api.server_tool_name(tool_type)
    if name is None:
        known = [v for versions in api.SERVER_TOOL_VERSIONS.values() for v in versions]
        tags = ", ".join(f"'{tag}'" for tag in (*CUSTOM_TOOL_TYPES, *known))
        return (
            f"tools.{i}: Input tag '{tool_type}' found using 'type' does not match any of "
            f"the expected tags: {tags}"
        )
    where = f"tools.{i}.{tool_type}"
    if tool.get("name") != name:
        return f"{where}.name: Input should be '{name}'"
    extra = sorted(set(tool) - {"type", "name"} - api.SERVER_TOOL_FIELDS[name])
    if extra:
        return f"{where}.{extra[0]}: Extra inputs are not permitted"
    return _max_uses_problem(where, tool) or _domains_problem(where, tool)


def _max_uses_problem(where: str, tool: Mapping[str, Any]) -> str | None:
    max_uses = tool.get("max_uses")
    if max_uses is None:
        return None
    if not isinstance(max_uses, int) or isinstance(max_uses, bool):
        return f"{where}.max_uses: Input should be a valid integer"
    if max_uses < 1:
        return f"{where}.max_uses: Input should be greater than 0"
    return None


def _domains_problem(where: str, tool: Mapping[str, Any]) -> str | None:
    allowed, blocked = tool.get("allowed_domains"), tool.get("blocked_domains")
    if allowed and blocked:
        return f"{where}: only one of allowed_domains and blocked_domains may be provided, not both"
    for field, domains in (("allowed_domains", allowed), ("blocked_domains", blocked)):
        if domains is None:
            continue
        if not isinstance(domains, list) or not all(isinstance(d, str) for d in domains):
            return f"{where}.{field}: Input should be a valid list of strings"
        with_scheme = [d for d in domains if "://" in d]
        if with_scheme:
            return f"{where}.{field}: domains must not include a scheme (got {with_scheme[0]!r})"
    return None


def offered_server_tools(body: Mapping[str, Any]) -> set[str]:
    """The names of the server tools ``body`` offers."""
    tools = body.get("tools") or []
    return {
        str(tool.get("name"))
        for tool in tools
        if isinstance(tool, dict) and api.server_tool_name(str(tool.get("type"))) is not None
    }


def unanswered_server_call(messages: list[dict[str, Any]]) -> str | None:
    """An assistant turn, other than the last message, whose server tool call has no
    result block after it in the same turn (the client dropped or changed it)."""
    for i, message in enumerate(messages[:-1]):
        if message.get("role") != "assistant" or not isinstance(message.get("content"), list):
            continue
        blocks = [block for block in message["content"] if isinstance(block, dict)]
        calls = [b.get("id") for b in blocks if b.get("type") == "server_tool_use"]
        answered = {b.get("tool_use_id") for b in blocks if b.get("type") in RESULT_TYPES}
        missing = [str(call) for call in calls if call not in answered]
        if missing:
            return (
                f"messages.{i}: `server_tool_use` ids were found without a result block "
                f"after them: {', '.join(missing)}"
            )
    return None


def untitled_citation(messages: list[dict[str, Any]]) -> str | None:
    """A web search citation sent back without its ``title`` (required, though nullable)."""
    for i, message in enumerate(messages):
        content = message.get("content")
        for j, block in enumerate(content if isinstance(content, list) else []):
            citations = block.get("citations") if isinstance(block, dict) else None
            for k, citation in enumerate(citations if isinstance(citations, list) else []):
                if (
                    isinstance(citation, dict)
                    and citation.get("type") == "web_search_result_location"
                    and "title" not in citation
                ):
                    where = f"messages.{i}.content.{j}.citations.{k}"
                    return f"{where}.web_search_result_location.title: Field required"
    return None


def server_result_block(block: dict[str, Any], call: Mapping[str, Any] | None) -> dict[str, Any]:
    """A scripted result block (``results`` / ``text`` / ``error``) as the API's block."""
    tool_use_id = block.get("tool_use_id") or (call or {}).get("id") or "srvtoolu_unknown"
    if block["type"] == "web_search_tool_result":
        error = block.get("error")
        content: Any = (
            {"type": "web_search_tool_result_error", "error_code": error["error_code"]}
            if error
            else block.get("results", [])
        )
        return {"type": block["type"], "tool_use_id": tool_use_id, "content": content}
    return {"type": block["type"], "tool_use_id": tool_use_id, "content": _fetched(block, call)}


def _fetched(block: dict[str, Any], call: Mapping[str, Any] | None) -> dict[str, Any]:
    if block.get("error"):
        return {"type": "web_fetch_tool_result_error", "error_code": block["error"]["error_code"]}
    url = block.get("url") or str(((call or {}).get("input") or {}).get("url", ""))
    document: dict[str, Any] = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": block.get("text", "")},
        "citations": {"enabled": True},
    }
    if block.get("title"):
        document["title"] = block["title"]
    return {"type": "web_fetch_result", "url": url, "content": document}


def server_tool_usage(content: list[dict[str, Any]]) -> dict[str, int]:
    """``usage.server_tool_use`` of a reply: the searches and fetches that ran, by their
    results (a failed one is not billed; a call paused before its result counts in the
    continuation that brings it)."""
    ran = [
        block["type"]
        for block in content
        if block.get("type") in RESULT_TYPES and not _is_error(block)
    ]
    return {
        "web_search_requests": ran.count("web_search_tool_result"),
        "web_fetch_requests": ran.count("web_fetch_tool_result"),
    }


def _is_error(block: Mapping[str, Any]) -> bool:
    content = block.get("content")
    return isinstance(content, dict) and str(content.get("type", "")).endswith("_error")


def max_uses(body: Mapping[str, Any]) -> dict[str, int]:
    """The ``max_uses`` of each server tool ``body`` offers with one."""
    tools = [tool for tool in body.get("tools") or [] if isinstance(tool, dict)]
    return {
        str(tool.get("name")): tool["max_uses"]
        for tool in tools
        if api.server_tool_name(str(tool.get("type"))) is not None
        and isinstance(tool.get("max_uses"), int)
    }


def over_max_uses(result: dict[str, Any], tool_use_id: str) -> dict[str, Any]:
    """``result`` as the API answers a call past the tool's ``max_uses``."""
    error_type = (
        "web_search_tool_result_error"
        if result["type"] == "web_search_tool_result"
        else "web_fetch_tool_result_error"
    )
    content = {"type": error_type, "error_code": "max_uses_exceeded"}
    return {"type": result["type"], "tool_use_id": tool_use_id, "content": content}
