"""The fake Anthropic API's memory tool (``memory_20250818``): what it refuses in the
tool's definition, and what it checks of a scripted memory command.

The memory tool is client-side: the API defines it (the model knows its commands) and
the client runs them, so the request carries only ``{"type": "memory_20250818", "name":
"memory"}`` (plus the fields every tool may have: ``cache_control``, ``defer_loading``,
``allowed_callers``, ``input_examples``, ``strict``), and the model's calls are plain
``tool_use`` blocks named ``memory`` the client answers with ``tool_result``. Worded as
the API's pydantic errors: a ``name`` other than ``memory``, any other field (a
``description`` or ``input_schema`` of the client's own) is refused.

The model only calls the memory tool when the request offers it, with a command's fields
(anthropic SDK ``BetaMemoryTool20250818*Command``): a script that plays anything else
is a broken script, answered 400 so the test fails where it lies.

Sources: the memory tool page and the SDK's ``MemoryTool20250818Param`` and command types.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MEMORY_TOOL_TYPE = "memory_20250818"
MEMORY_TOOL_NAME = "memory"
MEMORY_TOOL_FIELDS = frozenset(
    {
        "type",
        "name",
        "cache_control",
        "defer_loading",
        "allowed_callers",
        "input_examples",
        "strict",
    }
)
COMMAND_FIELDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # command -> (required fields, optional fields), ``command`` itself aside
    "view": (frozenset({"path"}), frozenset({"view_range"})),
    "create": (frozenset({"path", "file_text"}), frozenset()),
    "str_replace": (frozenset({"path", "old_str", "new_str"}), frozenset()),
    "insert": (frozenset({"path", "insert_line", "insert_text"}), frozenset()),
    "delete": (frozenset({"path"}), frozenset()),
    "rename": (frozenset({"old_path", "new_path"}), frozenset()),
}


def memory_tool_problem(i: int, tool: Mapping[str, Any]) -> str | None:
    """What the API refuses in ``tools[i]``, a ``memory_20250818`` tool."""
    where = f"tools.{i}.{MEMORY_TOOL_TYPE}"
    if tool.get("name") != MEMORY_TOOL_NAME:
        return f"{where}.name: Input should be '{MEMORY_TOOL_NAME}'"
    extra = sorted(set(tool) - MEMORY_TOOL_FIELDS)
    if extra:
        return f"{where}.{extra[0]}: Extra inputs are not permitted"
    return None


def offers_memory(body: Mapping[str, Any]) -> bool:
    tools = body.get("tools") or []
    return any(isinstance(t, dict) and t.get("type") == MEMORY_TOOL_TYPE for t in tools)


def memory_command_problem(command: Mapping[str, Any]) -> str | None:
    """Why ``command`` is not a memory command the model could send (None: it is)."""
    name = command.get("command")
    if name not in COMMAND_FIELDS:
        return f"unknown memory command {name!r}: one of {', '.join(COMMAND_FIELDS)}"
    required, optional = COMMAND_FIELDS[str(name)]
    given = set(command) - {"command"}
    missing = sorted(required - given)
    if missing:
        return f"the memory command {name} needs {', '.join(missing)}"
    extra = sorted(given - required - optional)
    if extra:
        return f"the memory command {name} takes no {', '.join(extra)}"
    return None
