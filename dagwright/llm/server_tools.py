"""The Messages API's server-side web tools as request ``tools`` entries.

Web search and web fetch run inside the API: the model's ``server_tool_use`` block and
the API's ``web_search_tool_result`` / ``web_fetch_tool_result`` block arrive together in
the assistant's content, there is no ``tool_result`` to send, and the whole content goes
back unchanged in the next request (the results carry encrypted content the model reads
again). ``usage.server_tool_use`` counts the requests; a search is billed per 1,000.

The oldest version of each tool is used on purpose: the later ones add dynamic filtering,
which runs code execution and exists only on newer models, while these work on every
model that has the tools. Both are generally available (web fetch needed the beta header
``web-fetch-2025-09-10`` while in beta; the SDK 2.14 sends it without).
"""

from __future__ import annotations

from typing import Any

from dagwright.settings import WebToolSettings, WebToolsSettings

WEB_SEARCH = "web_search"
WEB_FETCH = "web_fetch"
SERVER_TOOL_NAMES = (WEB_SEARCH, WEB_FETCH)
WEB_SEARCH_TYPE = "web_search_20250305"
WEB_FETCH_TYPE = "web_fetch_20250910"
# What the planner and ``worker-types`` say each one does.
DESCRIPTIONS = {
    WEB_SEARCH: "Search the web (run by the Anthropic API; results cited).",
    WEB_FETCH: "Read a web page or PDF whose URL the conversation holds (run by the API).",
}


def server_tool_definition(name: str, web: WebToolsSettings) -> dict[str, Any] | None:
    """The ``tools`` entry of server tool ``name`` as the settings make it; None if the
    deployment does not offer it."""
    if name == WEB_SEARCH and web.search is not None:
        return {"type": WEB_SEARCH_TYPE, "name": WEB_SEARCH, **_limits(web.search)}
    if name == WEB_FETCH and web.fetch is not None:
        fetch = {"type": WEB_FETCH_TYPE, "name": WEB_FETCH, **_limits(web.fetch)}
        fetch["citations"] = {"enabled": True}  # off by default for fetch; on for search
        if web.fetch.max_content_tokens is not None:
            fetch["max_content_tokens"] = web.fetch.max_content_tokens
        return fetch
    return None


def _limits(tool: WebToolSettings) -> dict[str, Any]:
    limits: dict[str, Any] = {"max_uses": tool.max_uses}
    if tool.allowed_domains:
        limits["allowed_domains"] = list(tool.allowed_domains)
    if tool.blocked_domains:
        limits["blocked_domains"] = list(tool.blocked_domains)
    return limits


def domains_words(name: str, web: WebToolsSettings) -> str:
    """``(only: a.org, b.org)``, ``(not: c.com)`` or ``""``: the domains of a tool, for
    the planner's catalog."""
    tool = web.search if name == WEB_SEARCH else web.fetch
    if tool is None:
        return ""
    if tool.allowed_domains:
        return f" (only: {', '.join(tool.allowed_domains)})"
    if tool.blocked_domains:
        return f" (not: {', '.join(tool.blocked_domains)})"
    return ""
