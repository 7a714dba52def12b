"""Running the client's blocking calls off the event loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

from starlette.concurrency import run_in_threadpool

P = ParamSpec("P")
T = TypeVar("T")


async def in_thread(call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``call(*args, **kwargs)`` in a worker thread: every client call talks to Redis."""
    return await run_in_threadpool(call, *args, **kwargs)
