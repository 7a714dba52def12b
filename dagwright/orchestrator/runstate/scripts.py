"""Loads the run state machine's Lua scripts, each prefixed with the shared prelude.

The prelude names ``KEYS[i]`` after ``keys.RUN_KEY_NAMES``, injected here, so the key
order is written down once; a script's shared keys (the DLQ stream) follow the run's.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import redis
from redis.commands.core import Script

from dagwright.keys import RUN_KEY_NAMES
from dagwright.redis_scripts import load_script, lua_source

PACKAGE = "dagwright.orchestrator.runstate"

SCRIPT_NAMES = (
    "claim",
    "complete",
    "fail",
    "retry",
    "renew",
    "reconcile",
    "cancel",
    "progress",
    "workspace",
    "expand",
    "replay",
    "forget",
    "compact",
    "age_out_begin",
    "age_out",
    "await_approval",
    "decide",
    "reserve",
    "park",
    "pool",
    "pull",
    "admit",
    "spawn",
    "settle",
    "death",
)

# How many dependents one script counts and decides when a node succeeds (complete.lua,
# settle.lua; prelude.lua settle_dependents): a fan-out of thousands is released a chunk
# at a time, each chunk a short script, so other runs' submits and claims run between
# them instead of waiting for the whole release (Valkey runs one script at a time). 200
# dependents take about 2 ms of Valkey on a quiet machine; the pool.lua step for them
# about as much. Smaller chunks cost the big run more round trips.
SETTLE_CHUNK = 200


@cache
def prelude() -> str:
    """``lua/prelude.lua`` with the run's key names put in."""
    names = ", ".join(f"'{key}'" for key in RUN_KEY_NAMES)
    source = lua_source(PACKAGE, "prelude").replace("__RUN_KEY_NAMES__", names)
    return source.replace("__SETTLE_CHUNK__", str(SETTLE_CHUNK))


class RunScripts:
    """The run-state scripts bound to one Redis client."""

    def __init__(self, client: redis.Redis, *, events_maxlen: int, retention_s: int) -> None:
        self._client = client
        self._scripts: dict[str, Script] = {
            name: load_script(client, PACKAGE, name, prelude=prelude) for name in SCRIPT_NAMES
        }
        self._common = [events_maxlen, retention_s]

    def call(self, name: str, keys: Sequence[str | bytes], *args: Any, client: Any = None) -> Any:
        """Run a script on the run's ``keys``; ``client`` may be a pipeline."""
        return self._scripts[name](keys=keys, args=[*self._common, *args], client=client)

    def call_in_one_trip(
        self, calls: Sequence[tuple[str, Sequence[bytes], Sequence[Any]]]
    ) -> list[Any]:
        """Run several idempotent scripts in order, ``(name, keys, args)`` each, in one
        round trip (one server only: a Cluster's pipeline takes no script). EVALSHA in a
        plain pipeline: redis-py's pipeline of ``Script`` objects would first ask SCRIPT
        EXISTS, a round trip of its own. After a NOSCRIPT (the server restarted or was
        flushed) the scripts are loaded and the whole batch runs again, which their being
        idempotent makes harmless."""
        for attempt in range(2):
            pipe = self._client.pipeline(transaction=False)
            for name, keys, args in calls:
                sha = _attributes(self._scripts[name]).sha
                pipe.evalsha(sha, len(keys), *keys, *self._common, *args)
            replies = pipe.execute(raise_on_error=False)
            missing = [r for r in replies if isinstance(r, redis.exceptions.NoScriptError)]
            if not missing or attempt:
                break
            for name, _, _ in calls:
                self._client.script_load(_attributes(self._scripts[name]).script)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies


def _attributes(script: Script) -> Any:
    """A ``Script``'s ``sha`` and ``script`` (set in its ``__init__``; the type stubs do not
    declare them)."""
    return script
