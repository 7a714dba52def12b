"""Redis errors leave every public method of the client (sync or async, the sub-clients'
too) as dagwright's typed errors: BrokerUnavailableError for a Redis that cannot be
reached, ConfigurationError for refused credentials or a server that speaks no RESP
(``connection.translate_redis_errors``).

One mechanism, applied once per class: a client class derives from ``ConnectedPart``,
whose ``__init_subclass__`` wraps each public method the class defines (a plain method, a
coroutine, a generator or an async generator) at class creation. A new method is covered
by being written; tests/test_client_redis_errors.py calls every public method against a
Redis that is not there and fails on any redis error that escapes.

Rejected: a ``@translated`` decorator on each method (47 of them, and a method added
without it, such as the memory client's, let ``redis.ConnectionError`` out); translating in
the run store, under the client: the store is shared with the workers, whose callers
handle redis errors themselves (retries, the reconciler), and the sub-clients read
Redis through other stores too (memory, schedules, tokens).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from functools import wraps
from typing import TYPE_CHECKING, Any

from dagwright.connection import translate_redis_errors

if TYPE_CHECKING:
    from dagwright.client.runs import Client

TRANSLATES = "__translates_redis_errors__"  # set on each wrapped method (tests read it)


class ConnectedPart:
    """A client, or one of its parts: it names the Redis it talks to (``redis_url``, an
    attribute or a property), and every public method its subclasses define translates
    Redis errors."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, member in list(vars(cls).items()):
            if is_public_method(name, member):
                setattr(cls, name, translating(member))


def is_public_method(name: str, member: Any) -> bool:
    """A function defined in the class body under a public name (not a property, a
    cached property, a static or class method, nor one wrapped already)."""
    return (
        not name.startswith("_") and inspect.isfunction(member) and not hasattr(member, TRANSLATES)
    )


def translating(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` with Redis errors translated (naming the part's URL) while it runs: for
    a generator or an async generator, while it is iterated."""
    if inspect.isasyncgenfunction(method):
        wrapper = translating_async_generator(method)
    elif inspect.iscoroutinefunction(method):
        wrapper = translating_coroutine(method)
    elif inspect.isgeneratorfunction(method):
        wrapper = translating_generator(method)
    else:
        wrapper = translating_call(method)
    setattr(wrapper, TRANSLATES, True)
    return wrapper


def translating_call(method: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(method)
    def wrapper(part: Any, *args: Any, **kwargs: Any) -> Any:
        with translate_redis_errors(part.redis_url):
            return method(part, *args, **kwargs)

    return wrapper


def translating_coroutine(method: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(method)
    async def wrapper(part: Any, *args: Any, **kwargs: Any) -> Any:
        with translate_redis_errors(part.redis_url):
            return await method(part, *args, **kwargs)

    return wrapper


def translating_generator(method: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(method)
    def wrapper(part: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        with translate_redis_errors(part.redis_url):
            yield from method(part, *args, **kwargs)

    return wrapper


def translating_async_generator(method: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(method)
    async def wrapper(part: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        with translate_redis_errors(part.redis_url):
            async for item in method(part, *args, **kwargs):
                yield item

    return wrapper


class SubClient(ConnectedPart):
    """One domain of the client (``client.dlq``, ``client.schedules``,
    ``client.approvals``...), over the client's runtime, broker and Redis."""

    def __init__(self, client: Client) -> None:
        self._client = client

    @property
    def redis_url(self) -> str:
        return self._client.redis_url
