"""The tools an agent node is offered in this deployment, and how they are told.

An agent type lists tool names (``AgentSpec.tools``); a node may narrow them
(``Node.tools``). What the model is offered is that list as this deployment's settings
make it:

- a registered tool, unless its ``offered_when`` says the settings leave it nothing to
  do (``http_get`` with no ``DAGWRIGHT_HTTP_ALLOWED_DOMAINS``): a tool that refuses every
  call only spends turns (and, counted as failed calls, used to end the node);
- ``web_search`` / ``web_fetch``, the Messages API's server tools, when turned on
  (``DAGWRIGHT_WEB_SEARCH`` / ``DAGWRIGHT_WEB_FETCH``), with their domain lists and
  ``max_uses``: the API runs them, so no policy rule or audit entry of ours sees them.

The planner's catalog is made from the same list (``capability_lines``), so it never
promises what a type cannot do here. Tools registered by other means (MCP servers) take
part the same way: whatever ``ToolRegistry`` holds under a name the type lists is offered
and described from its own description.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dagwright.llm.server_tools import (
    DESCRIPTIONS,
    SERVER_TOOL_NAMES,
    domains_words,
    server_tool_definition,
)
from dagwright.settings import Settings
from dagwright.workers.tools.base import ToolRegistry

SUMMARY_CHARS = 160


@dataclass(frozen=True)
class OfferedTool:
    """A tool as one request offers it."""

    name: str
    summary: str
    """One line saying what it does (the planner's catalog)."""
    definition: dict[str, Any]
    """The Messages API ``tools`` entry."""
    runs_on_server: bool = False
    """Run by the API (web search, web fetch): never a ``tool_use`` for us to answer."""


def is_server_tool(name: str) -> bool:
    return name in SERVER_TOOL_NAMES


def unregistered(names: Sequence[str], tools: ToolRegistry) -> list[str]:
    """The names that are neither a registered tool nor a server tool."""
    return [name for name in names if not is_server_tool(name) and tools.get(name) is None]


def offered_tools(
    names: Sequence[str], tools: ToolRegistry, settings: Settings
) -> list[OfferedTool]:
    """The tools of ``names`` this deployment offers, in order (unregistered ones left
    out: ``unregistered`` says which)."""
    offered = []
    for name in names:
        tool = _offered(name, tools, settings)
        if tool is not None:
            offered.append(tool)
    return offered


def _offered(name: str, tools: ToolRegistry, settings: Settings) -> OfferedTool | None:
    if is_server_tool(name):
        definition = server_tool_definition(name, settings.web_tools)
        if definition is None:
            return None
        summary = DESCRIPTIONS[name] + domains_words(name, settings.web_tools)
        return OfferedTool(name, summary, definition, runs_on_server=True)
    tool = tools.get(name)
    if tool is None or not tool.offered(settings):
        return None
    summary, definition = _first_line(tool.description), tool.schema()
    if tool.settings_note is not None:
        note = tool.settings_note(settings)
        summary += f" {note}"
        definition = {**definition, "description": f"{tool.description}\n\n{note}"}
    return OfferedTool(name, summary, definition)


def capability_lines(offered: Sequence[OfferedTool], settings: Settings) -> list[str]:
    """What a type can do here, one line per tool, e.g. ``http_get: Fetch a web page ...
    (only: example.com)``."""
    lines = []
    for tool in offered:
        summary = tool.summary
        if tool.name == "http_get":
            summary += f" (only: {', '.join(settings.http_tool.allowed_domains)})"
        lines.append(f"{tool.name}: {summary}")
    return lines


def _first_line(description: str) -> str:
    sentence = description.strip().split("\n\n")[0].replace("\n", " ")
    return sentence if len(sentence) <= SUMMARY_CHARS else sentence[: SUMMARY_CHARS - 1] + "…"
