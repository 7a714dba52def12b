"""Context management in the fake Anthropic API: the checks of ``context_management`` and
the tool-result clearing the real API applies before the prompt reaches the model.

What the edit does is :mod:`dagwright.llm.context_management`'s (the docs' behaviour, as
data both sides read). Here: a request whose ``context_management`` the real API would
refuse gets a 400 (no beta header, an unknown edit or field, a malformed ``trigger``,
``keep`` or ``clear_at_least``, ``clear_thinking_20251015`` not first or without
thinking, a model the feature does not list); a valid one has its prompt cleared before
it is counted and cached, and its response reports ``context_management.applied_edits``
(in ``message_delta`` when streamed). ``compact_20260112`` (server-side compaction) is
not played: the fake refuses it rather than pretend.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagwright.llm.context_management import (
    CLEAR_THINKING,
    CLEAR_TOOL_USES,
    CLEAR_TOOL_USES_FIELDS,
    COMPACT,
    CONTEXT_MANAGEMENT_BETA,
    EDIT_TYPES,
    TRIGGER_TYPES,
    cleared,
    edit_of,
    takes_context_editing,
)
from dagwright.testing.fake_anthropic_tokens import count_input_tokens, estimate_tokens

FIELD = "context_management"


def context_management_problem(body: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    """Why the real API would refuse the request's ``context_management``; None if fine."""
    config = body.get(FIELD)
    if config is None:
        return None
    if CONTEXT_MANAGEMENT_BETA not in _betas(headers):
        return f"{FIELD}: Extra inputs are not permitted"
    if not isinstance(config, dict) or not isinstance(config.get("edits", []), list):
        return f"{FIELD}.edits: Input should be a valid list"
    if not takes_context_editing(str(body.get("model"))):
        return f"{FIELD}: context management is not supported for model {body.get('model')}"
    return _edits_problem(config.get("edits", []), body)


def _betas(headers: Mapping[str, str]) -> set[str]:
    return {beta.strip() for beta in headers.get("anthropic-beta", "").split(",")}


def _edits_problem(edits: list[Any], body: Mapping[str, Any]) -> str | None:
    for i, edit in enumerate(edits):
        kind = edit.get("type") if isinstance(edit, dict) else None
        if kind not in EDIT_TYPES:
            tags = ", ".join(f"'{tag}'" for tag in EDIT_TYPES)
            return (
                f"{FIELD}.edits.{i}: Input tag '{kind}' found using 'type' does not match any "
                f"of the expected tags: {tags}"
            )
        problem = _edit_problem(i, edit, body)
        if problem is not None:
            return problem
    kinds = [edit["type"] for edit in edits]
    if CLEAR_THINKING in kinds and kinds[0] != CLEAR_THINKING:
        return f"{FIELD}.edits: {CLEAR_THINKING} must be the first edit when edits are combined"
    return None


def _edit_problem(i: int, edit: Mapping[str, Any], body: Mapping[str, Any]) -> str | None:
    where = f"{FIELD}.edits.{i}.{edit['type']}"
    if edit["type"] == COMPACT:
        return f"{where}: fake-anthropic does not play server-side compaction"
    if edit["type"] == CLEAR_THINKING:
        thinking = body.get("thinking")
        on = isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
        return None if on else f"{where}: requires thinking to be enabled"
    extra = sorted(set(edit) - CLEAR_TOOL_USES_FIELDS)
    if extra:
        return f"{where}.{extra[0]}: Extra inputs are not permitted"
    return (
        _threshold_problem(f"{where}.trigger", edit.get("trigger"), TRIGGER_TYPES, minimum=1)
        or _threshold_problem(f"{where}.keep", edit.get("keep"), ("tool_uses",), minimum=0)
        or _threshold_problem(
            f"{where}.clear_at_least", edit.get("clear_at_least"), ("input_tokens",), minimum=0
        )
        or _names_problem(f"{where}.exclude_tools", edit.get("exclude_tools"))
    )


def _threshold_problem(
    where: str, value: object, types: tuple[str, ...], *, minimum: int
) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"{where}: Input should be a valid dictionary"
    if value.get("type") not in types:
        expected = " or ".join(f"'{kind}'" for kind in types)
        return f"{where}.type: Input should be {expected}"
    number = value.get("value")
    if not isinstance(number, int) or isinstance(number, bool):
        return f"{where}.value: Input should be a valid integer"
    if number < minimum:
        return f"{where}.value: Input should be greater than or equal to {minimum}"
    return None


def _names_problem(where: str, names: object) -> str | None:
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        return f"{where}: Input should be a valid list of strings"
    return None


def managed_prompt(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The request as the model sees it once its context edits are applied, and the
    response's ``context_management`` (None: the request asked for none)."""
    config = body.get(FIELD)
    if config is None:
        return body, None
    edit = edit_of(config, CLEAR_TOOL_USES)
    if edit is None:
        return body, {"applied_edits": []}
    messages, applied = cleared(body["messages"], edit, count_input_tokens(body), estimate_tokens)
    seen = {**body, "messages": messages}
    return seen, {"applied_edits": [applied] if applied else []}
