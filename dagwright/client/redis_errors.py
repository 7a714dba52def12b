"""Redis connection errors leave every client method as BrokerUnavailableError."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, Protocol, TypeVar

from dagwright.connection import translate_redis_errors

P = ParamSpec("P")
T = TypeVar("T")


class ConnectedPart(Protocol):
    """A client, or one of its sub-clients: what names the Redis it talks to."""

    @property
    def redis_url(self) -> str: ...


def translated(method: Callable[P, T]) -> Callable[P, T]:
    """``method`` of a ConnectedPart, with Redis errors translated (naming its URL)."""

    @wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        part: ConnectedPart = args[0]  # type: ignore[assignment]
        with translate_redis_errors(part.redis_url):
            return method(*args, **kwargs)

    return wrapper
