"""One MCP server, connected: its session held open by a task of the process's event loop.

The ``mcp`` SDK is asyncio (anyio) and its transports are context managers that must be
entered and left by one task. So each connection is one long-lived task on the
process's event-loop thread (``EventLoopThread``): it starts the transport (a stdio
child process, or a streamable-HTTP client), initialises the session, lists the tools,
then waits until it is closed. Worker threads call into it with
``asyncio.run_coroutine_threadsafe`` and a timeout, so a server that hangs holds no
worker for longer than its ``timeout_s``.

A server that died (its process killed, its HTTP endpoint gone) is seen when a call
fails with the SDK's ``CONNECTION_CLOSED``, or a failed call's ping gets no answer: the
pool (``pool.py``) then closes this connection and opens a new one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import sys
import threading
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TextIO, TypeVar

from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT, CallToolResult, Tool

from dagwright.errors import ConfigurationError, ToolError, ToolTimeoutError
from dagwright.settings import McpServerSettings

T = TypeVar("T")

PING_TIMEOUT_S = 5.0
CLOSE_TIMEOUT_S = 10.0
MAX_TOOL_PAGES = 20  # tools/list pages read; a server listing more is cut there


class ServerGoneError(Exception):
    """The server does not answer any more (its process died, its endpoint went away)."""


class EventLoopThread:
    """An asyncio event loop running in a daemon thread, for the MCP sessions of one
    process; ``run`` waits for a coroutine from any other thread, with a timeout."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="dagwright-mcp", daemon=True
        )
        self.thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout_s: float, what: str) -> T:
        """The coroutine's result; ToolTimeoutError (and the coroutine cancelled) past
        ``timeout_s``."""
        future = self.submit(coroutine)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolTimeoutError(f"{what} did not finish within {timeout_s:g}s") from None

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


class McpConnection:
    """A session with one server, open until ``close``; ``tools`` as it listed them."""

    def __init__(
        self,
        name: str,
        config: McpServerSettings,
        events: EventLoopThread,
        errlog: TextIO = sys.stderr,
    ) -> None:
        self.name = name
        self.config = config
        self.events = events
        self.errlog = errlog  # where a stdio server's stderr goes (the worker's log)
        self.tools: list[Tool] = []
        self._session: ClientSession | None = None
        self._closing: asyncio.Event | None = None
        self._held: concurrent.futures.Future[None] | None = None

    def open(self) -> McpConnection:
        """Start the server and list its tools, within ``startup_timeout_s``."""
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._held = self.events.submit(self._hold(ready))
        try:
            ready.result(self.config.startup_timeout_s)
        except concurrent.futures.TimeoutError:
            self.close()
            raise ServerGoneError(
                f"it did not start within {self.config.startup_timeout_s:g}s"
            ) from None
        except Exception as exc:
            self.close()
            raise ServerGoneError(describe(exc)) from exc
        return self

    async def _hold(self, ready: concurrent.futures.Future[None]) -> None:
        """The connection's whole life, in one task (the SDK's context managers need it)."""
        self._closing = asyncio.Event()
        try:
            async with self._transport() as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                self.tools = await listed_tools(session)
                self._session = session
                ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else ServerGoneError())
            if not isinstance(exc, Exception):
                raise
        finally:
            self._session = None

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        config = self.config
        if config.command is not None:
            params = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                env=passed_environment(config.env),
                cwd=config.cwd,
            )
            async with stdio_client(params, errlog=self.errlog) as streams:
                yield streams
            return
        assert config.url is not None
        headers = passed_headers(config.headers)
        async with (
            create_mcp_http_client(headers=headers) as http,
            streamable_http_client(config.url, http_client=http) as streams,
        ):
            yield streams

    def call(self, tool: str, args: dict[str, Any]) -> CallToolResult:
        """Call ``tool``; ServerGoneError if the server is gone, ToolTimeoutError past
        ``timeout_s``, ToolError if the live server refused the call (a protocol error:
        an unknown tool, invalid parameters)."""
        session = self._session
        if session is None:
            raise ServerGoneError("the connection is closed")
        timeout_s = self.config.timeout_s
        call = session.call_tool(tool, args, read_timeout_seconds=timeout_s)
        try:
            return self.events.run(call, timeout_s + 1.0, f"the MCP tool {tool!r}")
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise ToolTimeoutError(
                    f"the MCP tool {tool!r} did not answer within {timeout_s:g}s"
                ) from exc
            if exc.code == CONNECTION_CLOSED or not self.answers():
                raise ServerGoneError(exc.message) from exc
            raise ToolError(f"the MCP server refused the call: {exc.message}") from exc
        except ToolTimeoutError:
            raise
        except Exception as exc:  # a broken pipe, a refused connection: is it still there?
            if self.answers():
                raise
            raise ServerGoneError(describe(exc)) from exc

    def answers(self) -> bool:
        """Whether the server answers a ping now."""
        session = self._session
        if session is None:
            return False
        try:
            self.events.run(session.send_ping(), PING_TIMEOUT_S, "ping")
        except Exception:
            return False
        return True

    def close(self) -> None:
        """End the session (a stdio server's process is stopped), within a bound."""
        closing, held = self._closing, self._held
        if closing is not None:
            self.events.loop.call_soon_threadsafe(closing.set)
        if held is not None:
            with contextlib.suppress(Exception):
                held.result(CLOSE_TIMEOUT_S)


async def listed_tools(session: ClientSession) -> list[Tool]:
    """Every tool the server lists, page after page."""
    result = await session.list_tools()
    tools = list(result.tools)
    for _ in range(MAX_TOOL_PAGES):
        if result.next_cursor is None:
            break
        result = await session.list_tools(params=next_page(result.next_cursor))
        tools.extend(result.tools)
    return tools


def next_page(cursor: str) -> Any:
    from mcp_types import PaginatedRequestParams

    return PaginatedRequestParams(cursor=cursor)


def passed_environment(names: list[str]) -> dict[str, str]:
    """The variables a server is given from this process's environment (beside the SDK's
    safe defaults: PATH, HOME...). A missing one is a configuration error, said early."""
    missing = [name for name in names if name not in os.environ]
    if missing:
        raise ConfigurationError(
            f"environment variable(s) {', '.join(missing)} of an MCP server are not set"
        )
    return {name: os.environ[name] for name in names}


def passed_headers(headers: dict[str, str]) -> dict[str, str]:
    """Header name -> the value of the environment variable the settings name for it."""
    values = passed_environment(list(headers.values()))
    return {header: values[variable] for header, variable in headers.items()}


def describe(exc: BaseException) -> str:
    """One line about ``exc``: an exception group (anyio's) by its first leaf."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"
