"""The Messages API's context management (tool-result clearing), as data both sides read.

Context editing (beta, header ``context-management-2025-06-27``) is asked for with a
request's ``context_management: {"edits": [...]}``. Its ``clear_tool_uses_20250919``
edit is applied by the API before the prompt reaches the model: once the prompt passes
its ``trigger`` (``{"type": "input_tokens" | "tool_uses", "value": n}``, default 100,000
input tokens), the oldest tool results are replaced by a placeholder, all but the
``keep`` most recent tool uses (``{"type": "tool_uses", "value": n}``, default 3),
sparing the tools named in ``exclude_tools``, and their ``tool_use`` inputs too with
``clear_tool_inputs``. With ``clear_at_least`` (``{"type": "input_tokens", ...}``)
nothing is cleared unless that many tokens would be. The client keeps, and sends, the
whole conversation: the edit is made anew on each request, so once past the trigger the
prompt stays about as long as ``keep`` tool results. The response says what was done:
``context_management: {"applied_edits": [{"type": ..., "cleared_tool_uses": n,
"cleared_input_tokens": n}]}``. ``clear_thinking_20251015``, when sent with other edits,
must come first.

The client (``llm/wire.py``) reads which models take it; the agent loop estimates its
next call as the API will see it (``cleared``); the fake
(``testing/fake_anthropic_context.py``) applies the same edit to the prompt it counts.

Sources: the context editing page (strategies, parameters, defaults, response shape,
supported models) and the anthropic SDK's beta types (``BetaClearToolUses20250919EditParam``,
``BetaContextManagementResponse``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from dagwright.llm.messages_api_rules import MODELS_WITH_CONTEXT_EDITING

CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
COMPACT = "compact_20260112"
EDIT_TYPES = (CLEAR_TOOL_USES, CLEAR_THINKING, COMPACT)
DEFAULT_TRIGGER: dict[str, Any] = {"type": "input_tokens", "value": 100_000}
DEFAULT_KEEP: dict[str, Any] = {"type": "tool_uses", "value": 3}
TRIGGER_TYPES = ("input_tokens", "tool_uses")
CLEAR_TOOL_USES_FIELDS = frozenset(
    {"type", "trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs"}
)
# What a cleared tool result says in its place (the fake's wording; the API's own
# placeholder is not published).
CLEARED_RESULT = "[this tool result was cleared to save context]"


Counter = Callable[[object], int]


def takes_context_editing(model: str) -> bool:
    """Whether ``model`` accepts ``context_management`` with tool-result clearing."""
    return model.lower().removeprefix("anthropic.").startswith(MODELS_WITH_CONTEXT_EDITING)


def clear_tool_uses_edit(trigger_tokens: int, keep: int, clear_at_least: int) -> dict[str, Any]:
    """The ``clear_tool_uses_20250919`` edit dagwright sends (``clear_at_least`` 0: unset)."""
    edit: dict[str, Any] = {
        "type": CLEAR_TOOL_USES,
        "trigger": {"type": "input_tokens", "value": trigger_tokens},
        "keep": {"type": "tool_uses", "value": keep},
    }
    if clear_at_least > 0:
        edit["clear_at_least"] = {"type": "input_tokens", "value": clear_at_least}
    return edit


def cleared(
    messages: list[dict[str, Any]],
    edit: Mapping[str, Any],
    prompt_tokens: int,
    count: Counter,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """``messages`` as the API shows them to the model under ``edit`` (a
    ``clear_tool_uses_20250919``), with what it reports (None: not applied). ``prompt_tokens``:
    the whole prompt's input tokens; ``count``: the tokens of a JSON value."""
    if not _triggered(messages, edit, prompt_tokens):
        return messages, None
    edited = copy.deepcopy(messages)
    ids = _clearable_ids(edited, edit)
    before = count(edited)
    _clear_results(edited, ids)
    _clear_inputs(edited, ids, edit.get("clear_tool_inputs"))
    saved = before - count(edited)
    if not ids or saved < _value(edit.get("clear_at_least")):
        return messages, None
    applied = {
        "type": CLEAR_TOOL_USES,
        "cleared_tool_uses": len(ids),
        "cleared_input_tokens": saved,
    }
    return edited, applied


def _value(threshold: object, default: int = 0) -> int:
    """The ``value`` of a ``{"type": ..., "value": n}`` threshold (``default`` if unset)."""
    if not isinstance(threshold, Mapping):
        return default
    return int(threshold.get("value", default))


def _triggered(messages: list[dict[str, Any]], edit: Mapping[str, Any], prompt_tokens: int) -> bool:
    trigger = edit.get("trigger") or DEFAULT_TRIGGER
    limit = _value(trigger, DEFAULT_TRIGGER["value"])
    if trigger.get("type") == "tool_uses":
        return len(_tool_uses(messages)) > limit
    return prompt_tokens > limit


def _tool_uses(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        block
        for message in messages
        if message.get("role") == "assistant" and isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_use"
    ]


def _clearable_ids(messages: list[dict[str, Any]], edit: Mapping[str, Any]) -> set[str]:
    """The tool uses to clear: all but the ``keep`` latest, less the excluded tools."""
    keep = _value(edit.get("keep"), DEFAULT_KEEP["value"])
    uses = _tool_uses(messages)
    older = uses[: max(len(uses) - keep, 0)]
    spared = set(edit.get("exclude_tools") or ())
    answered = _answered_ids(messages)
    return {
        str(use.get("id"))
        for use in older
        if use.get("name") not in spared and use.get("id") in answered
    }


def _answered_ids(messages: list[dict[str, Any]]) -> set[str]:
    return {str(block.get("tool_use_id")) for block in _results(messages)}


def _results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        block
        for message in messages
        if message.get("role") == "user" and isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def _clear_results(messages: list[dict[str, Any]], ids: set[str]) -> None:
    for block in _results(messages):
        if block.get("tool_use_id") in ids:
            block["content"] = CLEARED_RESULT


def _clear_inputs(messages: list[dict[str, Any]], ids: set[str], which: object) -> None:
    if not which:
        return
    names = set(which) if isinstance(which, list) else None
    for use in _tool_uses(messages):
        if use.get("id") in ids and (names is None or use.get("name") in names):
            use["input"] = {}


def edit_of(context_management: Mapping[str, Any] | None, kind: str) -> Mapping[str, Any] | None:
    """The edit of type ``kind`` in a request's ``context_management``, if any."""
    edits = (context_management or {}).get("edits") or []
    return next((e for e in edits if isinstance(e, dict) and e.get("type") == kind), None)
