"""Calling the client from a tool: off the event loop, its errors as tool errors.

Every ``Client`` call talks to Redis and blocks, so it runs in a worker thread (as the
HTTP API's routes do). A ``DagwrightError`` becomes a tool error (``isError``) carrying
the very line the CLI prints for it (``server.problems.public_line``: for the server's
own failures, a line that names no internal address); any other exception is left to
the SDK, which answers "Error executing tool <name>" and logs the traceback on the
server's side only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import anyio.to_thread
from mcp.server.mcpserver.exceptions import ToolError

from dagwright.errors import DagwrightError, public_line

P = ParamSpec("P")
T = TypeVar("T")


async def client_call(call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``call(*args, **kwargs)`` in a worker thread; a DagwrightError as a ToolError."""
    try:
        return await anyio.to_thread.run_sync(functools.partial(call, *args, **kwargs))
    except DagwrightError as exc:
        raise ToolError(public_line(exc)) from None
