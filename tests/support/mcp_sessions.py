"""Driving dagwright's MCP server with the real ``mcp`` client SDK, over stdio (a
``dagwright mcp`` subprocess) or streamable HTTP (``/mcp`` of a ``dagwright server``).

``McpSession.call`` calls a tool and answers its structured content (its ``result`` for a
list), or raises ``ToolFailed`` with the tool error's text. Every call and answer is
appended to the session's transcript; with ``DAGWRIGHT_MCP_TRANSCRIPT`` set, the
transcript is written to that file (a record of a client session, for people).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
from mcp import Client as McpClient
from mcp import StdioServerParameters
from mcp.client.extension import ClientExtension
from mcp.client.streamable_http import streamable_http_client

from dagwright.settings import Settings
from tests.support.processes import REPO_ROOT, settings_env

TRANSCRIPT_FILE = os.environ.get("DAGWRIGHT_MCP_TRANSCRIPT")


class ToolFailed(Exception):
    """A tool answered an error (``isError``): its text."""


@dataclass
class McpSession:
    client: McpClient
    lines: list[str] = field(default_factory=list)
    progress: list[tuple[float, float | None, str | None]] = field(default_factory=list)

    async def call(self, name: str, **arguments: Any) -> Any:
        self.note(f"→ {name} {json.dumps(arguments)}")

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            self.progress.append((progress, total, message))

        result = await self.client.call_tool(name, arguments, progress_callback=on_progress)
        text = " ".join(getattr(block, "text", "") for block in result.content)
        if result.is_error:
            self.note(f"← error: {text}")
            raise ToolFailed(text)
        found = result.structured_content
        answer = (
            found.get("result", found) if isinstance(found, dict) and len(found) == 1 else found
        )
        self.note(f"← {json.dumps(answer)[:600]}")
        return answer

    async def read(self, uri: str) -> str:
        """The text of resource ``uri`` (ToolFailed with the error's message if refused)."""
        self.note(f"→ read {uri}")
        try:
            found = await self.client.read_resource(uri)
        except Exception as exc:
            self.note(f"← error: {exc}")
            raise ToolFailed(str(exc)) from exc
        text = "".join(getattr(part, "text", "") for part in found.contents)
        self.note(f"← {text[:600]}")
        return text

    async def until(
        self, name: str, accept: Callable[[Any], bool], timeout: float = 30, **arguments: Any
    ) -> Any:
        """Call ``name`` until its answer is accepted (bounded by ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            answer = await self.call(name, **arguments)
            if accept(answer):
                return answer
            assert time.monotonic() < deadline, f"{name} never gave an accepted answer: {answer}"
            await anyio.sleep(0.2)

    def note(self, line: str) -> None:
        self.lines.append(line)
        transcribe(line)


def transcribe(line: str) -> None:
    """Append ``line`` to the transcript file, if one is asked for."""
    if TRANSCRIPT_FILE:
        with open(TRANSCRIPT_FILE, "a", encoding="utf-8") as out:
            out.write(line + "\n")


def stdio_parameters(settings: Settings, **extra_env: str) -> StdioServerParameters:
    """``dagwright mcp`` over the test settings, run as a client's config runs it."""
    env = {**settings_env(settings), **extra_env}
    return StdioServerParameters(
        command=sys.executable, args=["-m", "dagwright", "mcp"], env=env, cwd=REPO_ROOT
    )


@asynccontextmanager
async def stdio_session(
    settings: Settings, extensions: list[ClientExtension] | None = None, **extra_env: str
) -> AsyncIterator[McpSession]:
    params = stdio_parameters(settings, **extra_env)
    async with McpClient(params, extensions=extensions, read_timeout_seconds=60) as client:
        yield McpSession(client)


@asynccontextmanager
async def http_session(
    url: str, token: str | None, extensions: list[ClientExtension] | None = None
) -> AsyncIterator[McpSession]:
    """A session on ``url`` (``.../mcp``), with a Bearer ``token`` (None: none)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        transport = streamable_http_client(url, http_client=http)
        async with McpClient(transport, extensions=extensions, read_timeout_seconds=60) as client:
            yield McpSession(client)


def run(test: Callable[[], Awaitable[None]]) -> None:
    """Run an async test body on its own event loop (the SDK's anyio)."""
    if TRANSCRIPT_FILE:
        with open(TRANSCRIPT_FILE, "a", encoding="utf-8") as out:
            out.write(f"\n# {os.environ.get('PYTEST_CURRENT_TEST', '').split(' ')[0]}\n")
    anyio.run(test)


# The plans the MCP tests submit: a node waiting for approval, a node held until released.
GATED: dict[str, Any] = {
    "output": "deploy",
    "nodes": [
        {
            "id": "deploy",
            "type": "function",
            "function": "concat",
            "params": {"parts": ["release", "v1"]},
            "approval": "required",
        }
    ],
}
HELD: dict[str, Any] = {
    "nodes": [{"id": "h", "type": "function", "function": "held_until_released"}]
}
