"""The names MCP tools reach the model under: ``mcp__<server>__<tool>``.

The Messages API takes tool names matching ``^[a-zA-Z0-9_-]{1,64}$``; an MCP server may
name its tools otherwise (dots, slashes, long names). The namespace keeps two servers'
tools apart and lets a policy rule name a whole server (``mcp__git__*``).
"""

from __future__ import annotations

import hashlib
import re

PREFIX = "mcp__"
MAX_TOOL_NAME_CHARS = 64
UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def namespaced(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, characters the API refuses replaced by ``_``; a name
    too long is cut and ends with a hash of the whole, so that two stay distinct."""
    name = f"{PREFIX}{server}__{UNSAFE.sub('_', tool)}"
    if len(name) <= MAX_TOOL_NAME_CHARS and name == f"{PREFIX}{server}__{tool}":
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
    return f"{name[: MAX_TOOL_NAME_CHARS - 9]}_{digest}"


def server_glob(server: str) -> str:
    """The policy glob naming every tool of ``server``."""
    return f"{PREFIX}{server}__*"
