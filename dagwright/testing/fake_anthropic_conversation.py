"""The fake Anthropic API's rules for ``messages``: the turns the real API refuses.

Each check returns the real API's 400 message, or None; :func:`conversation_problem`
gives the first. Messages are addressed as the API addresses them (``messages.3``), so
an error reads as the real one and points at the same turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

EMPTY_CONTENT = (
    "messages.{i}: all messages must have non-empty content except for the optional final "
    "assistant message"
)
UNANSWERED_TOOL_USE = (
    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
    "{ids}. Each `tool_use` block must have a corresponding `tool_result` block in the next "
    "message."
)
ORPHAN_TOOL_RESULT = (
    "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. "
    "Each `tool_result` block must have a corresponding `tool_use` block in the previous "
    "message."
)
TOOL_RESULT_NOT_FIRST = (
    "messages.{i}: `tool_result` blocks must come first in the user message content, "
    "before any other content block (found one at messages.{i}.content.{j})"
)

THINKING_FIRST = (
    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
    "`{found}`. When `thinking` is enabled, a final `assistant` message must start with a "
    "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We "
    "recommend you include thinking blocks from previous turns. To avoid this requirement, "
    "disable `thinking`."
)
THINKING_TYPES = ("thinking", "redacted_thinking")

Messages = list[dict[str, Any]]


def conversation_problem(messages: Messages) -> str | None:
    """The first thing the real API would refuse in ``messages``; None if nothing."""
    for check in _CHECKS:
        problem = check(messages)
        if problem is not None:
            return problem
    return None


def _roles(messages: Messages) -> str | None:
    if not messages:
        return "messages: at least one message is required"
    for i, message in enumerate(messages):
        if message.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
    return None


def _empty_content(messages: Messages) -> str | None:
    for i, message in enumerate(messages):
        is_prefill = i == len(messages) - 1 and message.get("role") == "assistant"
        if message.get("content") in ("", []) and not is_prefill:
            return EMPTY_CONTENT.format(i=i)
    return None


def _empty_text(messages: Messages) -> str | None:
    for message in messages:
        for block in _blocks(message):
            if block.get("type") == "text" and not str(block.get("text", "")).strip():
                if block.get("text"):
                    return "messages: text content blocks must contain non-whitespace text"
                return "messages: text content blocks must be non-empty"
    return None


def _prefill_whitespace(messages: Messages) -> str | None:
    last = messages[-1]
    if last.get("role") != "assistant":
        return None
    texts = [block for block in _blocks(last) if block.get("type") == "text"]
    if texts and str(texts[-1].get("text", "")).rstrip() != texts[-1].get("text"):
        return "messages: final assistant content cannot end with trailing whitespace"
    return None


def _tool_results_first(messages: Messages) -> str | None:
    for i, message in enumerate(messages):
        types = [block.get("type") for block in _blocks(message)]
        for j, block_type in enumerate(types):
            if block_type == "tool_result" and any(t != "tool_result" for t in types[:j]):
                return TOOL_RESULT_NOT_FIRST.format(i=i, j=j)
    return None


def _tool_uses_answered(messages: Messages) -> str | None:
    for i, message in enumerate(messages[:-1]):
        if message.get("role") != "assistant":
            continue
        calls = _ids(message, "tool_use", "id")
        answered = set(_ids(messages[i + 1], "tool_result", "tool_use_id"))
        if messages[i + 1].get("role") != "user":
            answered = set()
        missing = [call for call in calls if call not in answered]
        if missing:
            return UNANSWERED_TOOL_USE.format(i=i + 1, ids=", ".join(missing))
    return None


def _tool_results_called(messages: Messages) -> str | None:
    for i, message in enumerate(messages):
        previous = messages[i - 1] if i > 0 and messages[i - 1].get("role") == "assistant" else {}
        calls = set(_ids(previous, "tool_use", "id"))
        for j, block in enumerate(_blocks(message)):
            if block.get("type") == "tool_result" and block.get("tool_use_id") not in calls:
                return ORPHAN_TOOL_RESULT.format(i=i, j=j, id=block.get("tool_use_id"))
    return None


def _tool_use_ids_unique(messages: Messages) -> str | None:
    seen: set[str] = set()
    for i, message in enumerate(messages):
        for call in _ids(message, "tool_use", "id"):
            if call in seen:
                return f"messages.{i}: `tool_use` ids must be unique (found {call} twice)"
            seen.add(call)
    return None


def thinking_turn_problem(messages: Messages) -> str | None:
    """With thinking on, the assistant turn whose tool calls the last user turn answers
    must open with the thinking block the API sent (the client must send it back)."""
    last = len(messages) - 1
    answers_tools = any(block.get("type") == "tool_result" for block in _blocks(messages[last]))
    if last < 1 or not answers_tools or messages[last - 1].get("role") != "assistant":
        return None
    blocks = _blocks(messages[last - 1])
    found = blocks[0].get("type") if blocks else "nothing"
    return None if found in THINKING_TYPES else THINKING_FIRST.format(i=last - 1, found=found)


def _thinking_signed(messages: Messages) -> str | None:
    for i, message in enumerate(messages):
        for j, block in enumerate(_blocks(message)):
            if block.get("type") == "thinking" and not block.get("signature"):
                return f"messages.{i}.content.{j}.thinking.signature: Field required"
    return None


_CHECKS: tuple[Callable[[Messages], str | None], ...] = (
    _roles,
    _empty_content,
    _empty_text,
    _prefill_whitespace,
    _tool_results_first,
    _tool_use_ids_unique,
    _tool_uses_answered,
    _tool_results_called,
    _thinking_signed,
)


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [block for block in content if isinstance(block, dict)]
    return []


def _ids(message: dict[str, Any], block_type: str, field: str) -> list[str]:
    return [str(block.get(field)) for block in _blocks(message) if block.get("type") == block_type]
