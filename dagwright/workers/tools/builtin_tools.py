"""Built-in tools: read a dependency's output, use the run's workspace, fetch a web page,
run code in the sandbox (``tools/code.py``), use a skill (``tools/skills.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from dagwright.egress import EgressPolicy
from dagwright.errors import EgressRefusedError, ToolError
from dagwright.settings import HttpToolSettings, Settings
from dagwright.workers.context import NodeContext
from dagwright.workers.tools.base import ToolRegistry
from dagwright.workers.tools.followups import propose_followup
from dagwright.workers.tools.memory import MEMORY_TOOL_DEFINITION, memory
from dagwright.workers.tools.pages import page, page_limit
from dagwright.workers.tools.run_python import (
    RUN_PYTHON_MAX_CHARS,
    RUN_PYTHON_TIMEOUT_S,
    run_python,
    sandbox_note,
)
from dagwright.workers.tools.skills import SkillTools, register_skill_tools

if TYPE_CHECKING:
    import httpx

MAX_REDIRECTS = 3


def read_input(ctx: NodeContext, node: str, offset: int = 0, limit: int | None = None) -> str:
    """Read the output of one of the tasks this task depends on, by node id. The first
    message shows each input cut at 20,000 characters; this reads it whole, a page at a
    time: a page that is not the end says so and gives the call that reads on.

    Args:
        node: The id of the task whose output to read, as the ``node="..."`` of its
            block in the first message names it.
        offset: The character to start at (0: the beginning).
        limit: How many characters to read, at most 199,800 (default 50,000).
    """
    if node not in ctx.inputs:
        known = ", ".join(ctx.inputs) or "none"
        raise ToolError(f"no input {node!r}; the inputs of this task are: {known}")
    value = ctx.inputs[node]
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)
    size = page_limit(limit, default=READ_INPUT_PAGE_CHARS, tool_limit=READ_INPUT_MAX_CHARS)
    return page(text, offset=offset, limit=size, read_on=reading_on("read_input", "node", node))


def workspace_read(ctx: NodeContext, path: str, offset: int = 0, limit: int | None = None) -> str:
    """Read a file of the run's shared workspace, which every task of the run shares, a
    page at a time: a page that is not the end says so and gives the call that reads on.

    Args:
        path: The file's path, relative to the workspace (e.g. ``notes/sources.md``).
        offset: The character to start at (0: the beginning).
        limit: How many characters to read, at most 49,800 (default 20,000).
    """
    text = ctx.workspace().read(path)
    size = page_limit(limit, default=WORKSPACE_READ_PAGE_CHARS, tool_limit=WORKSPACE_READ_MAX_CHARS)
    return page(text, offset=offset, limit=size, read_on=reading_on("workspace_read", "path", path))


def reading_on(tool: str, argument: str, value: str) -> Callable[[int], str]:
    """How a page's note tells the model to read on from an offset."""
    return lambda offset: f"call {tool} with {argument}={json.dumps(value)} and offset={offset}"


def workspace_write(ctx: NodeContext, path: str, content: str) -> str:
    """Write a file of the run's shared workspace, replacing it if it exists; the tasks
    that run after this one can read it.

    Args:
        path: The file's path, relative to the workspace (e.g. ``notes/sources.md``).
        content: The whole new content of the file, as text.
    """
    size = ctx.workspace().write(path, content)
    return f"wrote {size} bytes to {path}"


def workspace_list(ctx: NodeContext) -> list[str]:
    """List the files of the run's shared workspace."""
    return ctx.workspace().list()


def http_get(ctx: NodeContext, url: str) -> str:
    """Fetch a web page (HTTP GET) from an allowed domain: its status, content type and
    text, cut at the tool's output limit. Redirects are followed while they stay on
    allowed domains (and public addresses).

    Args:
        url: The page's absolute http or https URL.
    """
    # httpx: 70 ms (and rich, via its CLI) that only an agent fetching a page pays
    from dagwright.egress.transport import egress_client

    settings = ctx.settings.http_tool
    policy = EgressPolicy.from_settings(ctx.settings)
    with egress_client(policy, settings.timeout_s) as client:
        for _ in range(MAX_REDIRECTS + 1):
            check_allowed_url(url, settings.allowed_domains)
            try:
                with client.stream("GET", url, headers={"user-agent": "dagwright"}) as response:
                    if response.is_redirect and "location" in response.headers:
                        url = urljoin(url, response.headers["location"])
                        continue  # each hop is checked against the allow-lists again
                    return _page(url, response, settings)
            except EgressRefusedError as exc:  # an allowed domain resolving to a private address
                raise ToolError(str(exc)) from None
    raise ToolError(f"more than {MAX_REDIRECTS} redirects")


def can_fetch(settings: Settings) -> bool:
    """Whether http_get may fetch anything here: offered to agents only then."""
    return bool(settings.http_tool.allowed_domains)


def check_allowed_url(url: str, allowed_domains: Sequence[str]) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ToolError(f"only http and https URLs may be fetched, not {parts.scheme or url!r}")
    host = (parts.hostname or "").lower().rstrip(".")
    if not allowed_domains:
        raise ToolError("http_get may not fetch any domain here (DAGWRIGHT_HTTP_ALLOWED_DOMAINS)")
    if not any(host == d or host.endswith("." + d) for d in (d.lower() for d in allowed_domains)):
        raise ToolError(f"{host!r} is not an allowed domain; allowed: {', '.join(allowed_domains)}")


def _page(url: str, response: httpx.Response, settings: HttpToolSettings) -> str:
    """A header line, then the body as text (plain text, so that the tool's output limit
    cuts it cleanly, unlike JSON)."""
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > settings.max_bytes:
            break
    text = bytes(body[: settings.max_bytes]).decode(errors="replace")
    if len(body) > settings.max_bytes:
        text += f"\n[... the page is larger than {settings.max_bytes} bytes: cut here]"
    content_type = response.headers.get("content-type", "")
    return f"HTTP {response.status_code} {content_type} {url}\n\n{text}"


# read_input is where the agent goes for the inputs too long to show inline (20,000
# characters): its pages are larger than that. The output limits bound a page (and the
# note that ends it); the defaults keep a page's tokens moderate.
READ_INPUT_MAX_CHARS = 200_000
READ_INPUT_PAGE_CHARS = 50_000
WORKSPACE_READ_MAX_CHARS = 50_000
WORKSPACE_READ_PAGE_CHARS = 20_000
HTTP_GET_MAX_CHARS = 50_000


def register_builtin_tools(tools: ToolRegistry) -> None:
    # What another node, a file or a web page says reaches the model as delimited data.
    tools.register(read_input, max_output_chars=READ_INPUT_MAX_CHARS, carries_outside_content=True)
    tools.register(
        workspace_read, max_output_chars=WORKSPACE_READ_MAX_CHARS, carries_outside_content=True
    )
    tools.register(workspace_list, carries_outside_content=True)
    tools.register(workspace_write)
    tools.register(
        http_get,
        timeout_s=60.0,
        max_output_chars=HTTP_GET_MAX_CHARS,
        carries_outside_content=True,
        offered_when=can_fetch,
    )
    tools.register(
        run_python,
        timeout_s=RUN_PYTHON_TIMEOUT_S,
        max_output_chars=RUN_PYTHON_MAX_CHARS,
        settings_note=sandbox_note,
    )
    tools.register(propose_followup, timeout_s=60.0)
    # What an earlier run wrote to memory is data for this one, never instructions.
    tools.register(memory, carries_outside_content=True, api_definition=MEMORY_TOOL_DEFINITION)
    # With no skill: each refuses; a node with skills is given its own (agent_skills.py).
    register_skill_tools(tools, SkillTools())
