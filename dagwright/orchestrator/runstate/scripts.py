"""Loads the run state machine's Lua scripts, each with the shared prelude.

The prelude names ``KEYS[i]`` after ``keys.RUN_KEY_NAMES``, injected here, so the key
order is written down once; a script's shared keys (the DLQ stream) follow the run's.

On a server with functions (Redis/Valkey 7+) the prelude and every script are one
function library, loaded once per server (``FUNCTION LOAD``) and called with ``FCALL``:
the prelude's helpers are made when the library loads, not on every call, which was most
of a script's fixed cost (decision 118). The library is named after a digest of its
text, and so are its functions, so two versions of dagwright on one server each call
their own. On a Cluster (decision 119) the library is loaded on every primary, one at a
time (redis-py's own fan-out stops at the first primary that has it already), and each
``FCALL`` is sent to the primary of its first key's slot by ``cluster_routing``: redis-py
would ask the server for an ``FCALL``'s keys (``COMMAND GETKEYS``) twice per call. A
primary without the library (new, restarted empty, flushed) answers "Function not
found"; it is loaded again and the call sent again, as on one server. Several calls in
one round trip (``call_in_one_trip``) are a cluster pipeline of FCALLs there, each named
its node: a round trip to each primary holding some. Where functions are refused (a
server without them, an ACL that refuses them) the same text goes as EVALSHA scripts,
prelude prepended, on a Cluster too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import redis
from redis.commands.core import Script

from dagwright.keys import RUN_KEY_NAMES
from dagwright.orchestrator.runstate.cluster_routing import send_to_each_primary, send_to_slot_of
from dagwright.redis_cluster import FAILOVER_ERRORS, without_failover_wait
from dagwright.redis_scripts import is_cluster_client, load_script, lua_source

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
    table = ", ".join(f"{key} = keys[{i}]" for i, key in enumerate(RUN_KEY_NAMES, start=1))
    source = lua_source(PACKAGE, "prelude").replace("__RUN_KEY_NAMES__", names)
    source = source.replace("__RUN_KEY_TABLE__", "{" + table + "}")
    return source.replace("__SETTLE_CHUNK__", str(SETTLE_CHUNK))


def script_prelude() -> str:
    """The prelude of a script sent as EVALSHA: it sets the call's state itself."""
    return prelude() + "\nenter(KEYS, ARGV)"


@dataclass(frozen=True)
class RunLibrary:
    """The run scripts as one function library: its name, text, and function names."""

    name: str
    source: str

    def function(self, script: str) -> str:
        """The name ``FCALL`` calls ``script`` by."""
        return f"{self.name}_{script}"


@cache
def run_library() -> RunLibrary:
    """The prelude once, then each script as a function that calls ``enter`` first (its
    ``KEYS``, ``ARGV`` and top-level ``return`` work in a function as in a script)."""
    functions = "".join(
        f"\nredis.register_function('__NAME___{name}', function(KEYS, ARGV)\n"
        f"enter(KEYS, ARGV)\n{lua_source(PACKAGE, name)}\nend)\n"
        for name in SCRIPT_NAMES
    )
    text = prelude() + "\n" + functions
    name = "dw_" + hashlib.sha1(text.encode()).hexdigest()[:16]
    return RunLibrary(name, f"#!lua name={name}\n" + text.replace("__NAME__", name))


class RunScripts:
    """The run-state scripts bound to one Redis client."""

    def __init__(self, client: redis.Redis, *, events_maxlen: int, retention_s: int) -> None:
        self._client = client
        self._scripts: dict[str, Script] = {
            name: load_script(client, PACKAGE, name, prelude=script_prelude)
            for name in SCRIPT_NAMES
        }
        self._common = [events_maxlen, retention_s]
        self._cluster = is_cluster_client(client)
        self._library = run_library()
        # None: functions not tried yet on this server; False: EVALSHA only.
        self._functions: bool | None = None

    def call(self, name: str, keys: Sequence[str | bytes], *args: Any) -> Any:
        """Run a script on the run's ``keys`` (several in one round trip:
        ``call_in_one_trip``)."""
        if self._functions is not False:
            command = self._fcall(name, keys, args)
            try:
                reply = self._send_fcall(command, keys)
                self._functions = True  # and call_in_one_trip may send FCALLs too
                return reply
            except redis.exceptions.ResponseError as error:
                if not self._library_missing(error):
                    raise
                if _no_functions(error):
                    self._functions = False
            if self._functions is not False and self._load_library():
                return self._send_fcall(command, keys)
        return self._scripts[name](keys=keys, args=[*self._common, *args])

    def _fcall(self, name: str, keys: Sequence[str | bytes], args: Sequence[Any]) -> list[Any]:
        return ["FCALL", self._library.function(name), len(keys), *keys, *self._common, *args]

    def _send_fcall(self, command: list[Any], keys: Sequence[str | bytes]) -> Any:
        """One ``FCALL``; on a Cluster routed by its first key here (cluster_routing.py),
        not by redis-py's two ``COMMAND GETKEYS`` a call."""
        if self._cluster:
            return send_to_slot_of(self._client, keys[0], *command)  # type: ignore[arg-type]
        return self._client.execute_command(*command)

    def _library_missing(self, error: redis.exceptions.ResponseError) -> bool:
        """Whether ``error`` says that our functions are not on the server (never loaded
        here, the server restarted or was flushed) or that it has none (Redis 6, an ACL
        without them). An error the script raised is not one of these."""
        text = str(error)
        return text.startswith("Function not found") or _no_functions(error)

    def _load_library(self) -> bool:
        """Load the library (another process may just have), on a Cluster on each
        primary; False, and EVALSHA from now on, if the server has no functions or
        refuses them. A primary out of reach now is left out: the first call it gets
        after finds the library missing and loads it."""
        errors = [reply for reply in self._load_replies() if _load_failed(reply)]
        if any(_no_functions(error) for error in errors):
            self._functions = False
            return False
        if errors:
            raise errors[0]
        self._functions = True
        return True

    def _load_replies(self) -> list[Any]:
        """``FUNCTION LOAD``'s reply or error from the server, or from each primary."""
        command = ("FUNCTION", "LOAD", self._library.source)
        if self._cluster:
            return send_to_each_primary(self._client, *command)  # type: ignore[arg-type]
        try:
            return [self._client.execute_command(*command)]
        except redis.exceptions.ResponseError as error:
            return [error]

    def call_in_one_trip(
        self,
        calls: Sequence[tuple[str, Sequence[bytes], Sequence[Any]]],
        *,
        raise_errors: bool = True,
    ) -> list[Any]:
        """Run several idempotent scripts in order, ``(name, keys, args)`` each, in one
        round trip. FCALLs unless the server refused functions, else EVALSHA in a plain
        pipeline: redis-py's pipeline of ``Script`` objects would first ask SCRIPT
        EXISTS, a round trip of its own. On a Cluster a round trip to each primary, each
        FCALL named its node (``_route``), in order within each primary only (so calls
        whose order matters must share a slot); EVALSHA there is one call each, which a
        cluster pipeline refuses. After a missing library or NOSCRIPT (the server
        restarted or was flushed) it is loaded and the whole batch runs again, which
        their being idempotent makes harmless. ``raise_errors=False``: a call's error is
        its reply, the others run."""
        for attempt in range(3):  # FCALL refused, then EVALSHA's scripts loaded: 3 at worst
            functions = self._functions is not False
            replies = self._send(calls, functions)
            missing = [reply for reply in replies if self._missing(reply, functions)]
            if not missing:
                if functions and calls:
                    self._functions = True
                break
            if attempt < 2:
                self._recover(calls, functions, missing)
        for reply in replies if raise_errors else ():
            if isinstance(reply, Exception):
                raise reply
        return replies

    def _send(
        self, calls: Sequence[tuple[str, Sequence[bytes], Sequence[Any]]], functions: bool
    ) -> list[Any]:
        """One pipeline of FCALLs (``functions``) or EVALSHAs; errors as replies. On a
        Cluster, a call each where a pipeline cannot do: EVALSHA, which it refuses, and
        a batch that could not reach a primary or met a slot mid-migration
        (``redis_cluster.FAILOVER_ERRORS``, after redis-py's own tries), so the calls to
        the others still go through."""
        if self._cluster and not functions:
            return self._one_by_one(calls)
        try:
            return self._pipelined(calls, functions)
        except FAILOVER_ERRORS:
            if not self._cluster:
                raise
            return self._one_by_one(calls)

    def _pipelined(
        self, calls: Sequence[tuple[str, Sequence[bytes], Sequence[Any]]], functions: bool
    ) -> list[Any]:
        pipe = self._client.pipeline(transaction=False)
        for name, keys, args in calls:
            if functions:
                pipe.execute_command(*self._fcall(name, keys, args), **self._route(keys))
            else:
                sha = _attributes(self._scripts[name]).sha
                pipe.evalsha(sha, len(keys), *keys, *self._common, *args)
        return list(pipe.execute(raise_on_error=False))

    def _route(self, keys: Sequence[str | bytes]) -> dict[str, Any]:
        """On a Cluster, the node of an FCALL in a pipeline: its first key's primary
        (else redis-py's cluster pipeline asks COMMAND GETKEYS for each, before sending).
        One that meets MOVED, ASK or a lost connection redis-py sends again by itself,
        routing it so."""
        if not self._cluster:
            return {}
        node = self._client.get_node_from_key(keys[0])  # type: ignore[attr-defined]
        return {"target_nodes": node}

    def _one_by_one(self, calls: Sequence[tuple[str, Sequence[bytes], Sequence[Any]]]) -> list[Any]:
        """Each call alone (``call``: FCALL or EVALSHA), its error as its reply. A call to
        an unreachable primary fails after redis-py's quick tries, without the cluster
        client's failover wait: the batch is made again soon (renewals, the reconciler's
        next pass), and waiting for each of that primary's runs in turn would hold up the
        calls to the others."""
        replies: list[Any] = []
        with without_failover_wait(self._client):
            for name, keys, args in calls:
                try:
                    replies.append(self.call(name, keys, *args))
                except redis.RedisError as error:
                    replies.append(error)
        return replies

    def _recover(
        self,
        calls: Sequence[tuple[str, Sequence[bytes], Sequence[Any]]],
        functions: bool,
        missing: list[Any],
    ) -> None:
        """After a batch found its library or scripts missing: load them, or turn to
        EVALSHA if the server refuses functions."""
        if not functions:
            for name in {name for name, _, _ in calls}:
                self._client.script_load(_attributes(self._scripts[name]).script)
        elif any(_no_functions(reply) for reply in missing):
            self._functions = False
        else:
            self._load_library()

    def _missing(self, reply: Any, functions: bool) -> bool:
        """Whether a pipeline's ``reply`` says that its library or script is missing."""
        if functions:
            return isinstance(reply, redis.exceptions.ResponseError) and self._library_missing(
                reply
            )
        return isinstance(reply, redis.exceptions.NoScriptError)


def _load_failed(reply: Any) -> bool:
    """Whether a ``FUNCTION LOAD`` reply is an error that matters: not "already exists"
    (another process loaded it), nor a primary out of reach (see ``_load_library``)."""
    return (
        isinstance(reply, redis.RedisError)
        and "already exists" not in str(reply)
        and not isinstance(reply, redis.ConnectionError | redis.TimeoutError)
    )


def _no_functions(error: redis.RedisError) -> bool:
    """Whether the server has no functions (before Redis 7) or the ACL refuses them."""
    return (
        isinstance(error, redis.exceptions.NoPermissionError)
        or "unknown command" in str(error).lower()
    )


def _attributes(script: Script) -> Any:
    """A ``Script``'s ``sha`` and ``script`` (set in its ``__init__``; the type stubs do not
    declare them)."""
    return script
