"""Redis connection errors leave every client method (sync or async) as
BrokerUnavailableError; the sub-clients' common part."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps
from typing import TYPE_CHECKING, ParamSpec, Protocol, TypeVar

from dagwright.connection import translate_redis_errors

if TYPE_CHECKING:
    from dagwright.client.runs import Client

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


def translated_async(method: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """``translated`` for a coroutine method (``AsyncClient``'s): the same errors."""

    @wraps(method)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        part: ConnectedPart = args[0]  # type: ignore[assignment]
        with translate_redis_errors(part.redis_url):
            return await method(*args, **kwargs)

    return wrapper


class SubClient:
    """One domain of the client (``client.dlq``, ``client.schedules``,
    ``client.approvals``), over the client's runtime, broker and Redis."""

    def __init__(self, client: Client) -> None:
        self._client = client

    @property
    def redis_url(self) -> str:
        return self._client.redis_url
