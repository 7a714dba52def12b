"""Lua scripts run in Redis: one loader for all of them.

Every script lives in a ``.lua`` file beside the module that calls it (``<package>/lua/``),
never in a Python string. ``load_script`` binds one to a client as a redis-py ``Script``:
each call sends EVALSHA with the script's digest, and on NOSCRIPT (a restarted or flushed
server) loads the source and calls again, in pipelines too. So no call sends the source
on the hot path. An asyncio client (``redis.asyncio``) gets an ``AsyncScript``, awaited
the same way.

Replies are decoded by name, never by position: a script returns a flat list of
``name, value`` pairs (``{'status', 'ok', 'fence', 3}``) and ``named_reply`` turns it into a
dict for the typed result's ``from_reply``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, overload

import redis
from redis.commands.core import Script

if TYPE_CHECKING:
    import redis.asyncio
    from redis.commands.core import AsyncScript


@cache
def lua_source(package: str, name: str) -> str:
    """The text of ``<package>/lua/<name>.lua``."""
    return (resources.files(package) / "lua" / f"{name}.lua").read_text()


@overload
def load_script(
    client: redis.Redis, package: str, name: str, *, prelude: Callable[[], str] | None = None
) -> Script: ...


@overload
def load_script(
    client: redis.asyncio.Redis,
    package: str,
    name: str,
    *,
    prelude: Callable[[], str] | None = None,
) -> AsyncScript: ...


def load_script(
    client: redis.Redis | redis.asyncio.Redis,
    package: str,
    name: str,
    *,
    prelude: Callable[[], str] | None = None,
) -> Script | AsyncScript:
    """``<package>/lua/<name>.lua`` bound to ``client`` (EVALSHA, NOSCRIPT fallback);
    ``prelude`` gives text to put before it (shared helpers of a family of scripts).
    An asyncio client (``redis.asyncio.Redis``) gets a script to ``await``."""
    source = lua_source(package, name)
    if prelude is not None:
        source = prelude() + "\n" + source
    return client.register_script(source)


def is_cluster_client(client: Any) -> bool:
    """Whether ``client`` talks to a Redis Cluster (``redis+cluster://``): its pipelines
    take no script, and its commands reach the primary of their first key's slot."""
    from redis.cluster import RedisCluster

    return isinstance(client, RedisCluster)


def named_reply(reply: Any) -> dict[str, Any]:
    """A script's flat ``name, value, name, value...`` reply as a dict (names as str, also
    from a client that does not decode replies)."""
    items = list(reply or [])
    if len(items) % 2:
        raise ValueError(f"a script reply must pair names with values, got {len(items)} items")
    return {_text(items[i]): items[i + 1] for i in range(0, len(items), 2)}


def _text(name: Any) -> str:
    return name.decode() if isinstance(name, bytes) else str(name)
