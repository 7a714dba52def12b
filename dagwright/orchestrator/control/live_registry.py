"""The client's registry widened by what the live workers advertise.

A client checks a plan against its own registry: the modules it imported. The workers of
a running stack may have imported more (``dagwright up -I mytasks``), and they say so in
their capabilities (workers/capabilities.py). A plan calling ``fetch_prices`` from
``mytasks`` used to be refused by a client without ``--import mytasks``, though every
live worker could run it. So a submit, ``dagwright run`` and ``dagwright validate`` first
ask the live stack: a function some live worker advertises is accepted (its nodes routed
to the queue the workers declare for it, its params checked by the worker that runs
them); one that neither the client nor any live worker has is refused in one line naming
the live workers and what they offer, and how to add it. With no live worker (no stack,
or one still starting) the check is the client's own, as before.
"""

from __future__ import annotations

import dataclasses
import difflib
import time
from collections.abc import Callable

from dagwright.models import Plan
from dagwright.orchestrator.control.runnable import LiveCapabilities, live_entries
from dagwright.settings import Settings
from dagwright.workers import FUNCTION_TYPE, WorkerRegistry
from dagwright.workers.capabilities import WorkerCapabilities
from dagwright.workers.function_worker import function_worker_type

SHOWN_WORKERS = 3  # live workers named in a refusal; the others counted
SHOWN_FUNCTIONS = 10  # functions named in a refusal; the others counted
STACK_READ_TIMEOUT_S = 2.0  # the CLI's read of a running stack's capabilities


def registry_for_plan(
    plan: Plan, registry: WorkerRegistry, live: LiveCapabilities | None
) -> WorkerRegistry:
    """The registry to check and route ``plan`` with: ``registry`` widened by the live
    workers' functions (read again, not from the cache, when the plan names a function
    the cached reading lacks: a worker just started must not be missed)."""
    if live is None:
        return registry
    workers = live.read()
    if unknown_functions(plan, registry, workers):
        workers = live.read(fresh=True)
    return widened(registry, workers)


def unknown_functions(
    plan: Plan, registry: WorkerRegistry, workers: dict[str, WorkerCapabilities]
) -> list[str]:
    """The functions ``plan`` calls that neither ``registry`` nor ``workers`` have."""
    advertised = advertised_functions(workers)
    return [
        node.function
        for node in plan.nodes
        if node.type == FUNCTION_TYPE
        and node.function
        and registry.functions.get(node.function) is None
        and node.function not in advertised
    ]


def widened(registry: WorkerRegistry, workers: dict[str, WorkerCapabilities]) -> WorkerRegistry:
    """``registry`` with the functions the live ``workers`` advertise and it lacks, and a
    refusal of any other naming what the live workers offer; ``registry`` itself with no
    live worker."""
    if not workers or FUNCTION_TYPE not in registry.type_names():
        return registry
    functions = registry.functions.copy()
    for name, queue in advertised_functions(workers).items():
        if functions.get(name) is None:
            functions.add_from_workers(name, queue)
    wider = registry.copy(functions)
    wider.served_elsewhere = type_in_live_workers(workers)
    calling = function_worker_type(functions, unregistered=in_no_live_worker(workers))
    wider.replace_type(
        dataclasses.replace(
            registry.get(FUNCTION_TYPE),
            check_node=calling.check_node,
            own_queue_of=calling.own_queue_of,
        )
    )
    return wider


def advertised_functions(workers: dict[str, WorkerCapabilities]) -> dict[str, str | None]:
    """Each function some live worker has -> the queue declared for it (None: the
    ``function`` type's)."""
    found: dict[str, str | None] = {}
    for capabilities in workers.values():
        queues = dict(capabilities.function_queues)
        for name in capabilities.functions:
            if found.get(name) is None:
                found[name] = queues.get(name)
    return found


def in_no_live_worker(workers: dict[str, WorkerCapabilities]) -> Callable[[str], str]:
    """The problem of a function neither this client nor any live worker has: one line
    naming the live workers and their functions (bounded), and how to add it."""

    def problem(name: str) -> str:
        close = difflib.get_close_matches(name, advertised_functions(workers), n=1)
        meant = f" (did you mean {close[0]!r}?)" if close else ""
        return (
            f"function {name!r} is registered neither here nor in any live worker{meant}; "
            f"{live_offer(workers)}; to add it, restart `dagwright up` with `-I MODULE` "
            "naming the module that defines it (workers elsewhere: `--import MODULE` or "
            "DAGWRIGHT_IMPORTS)"
        )

    return problem


def type_in_live_workers(workers: dict[str, WorkerCapabilities]) -> Callable[[str], str]:
    """Where live workers serve a type this client has not registered: the client must
    import its module too, to route and price its nodes (the workers say which modules
    they import)."""

    def hint(name: str) -> str:
        serving = [w for w in workers.values() if name in w.worker_types]
        if not serving:
            return ""
        modules = sorted({module for worker in serving for module in worker.imports})
        flags = " ".join(f"--import {module}" for module in modules) or "--import MODULE"
        return (
            f"; live workers serve it: pass `{flags}` too, so that this client can route its nodes"
        )

    return hint


def live_offer(workers: dict[str, WorkerCapabilities]) -> str:
    """Which workers are alive and which functions they offer, bounded."""
    hosts = sorted(workers)
    shown = ", ".join(hosts[:SHOWN_WORKERS]) + more(len(hosts) - SHOWN_WORKERS)
    functions = sorted(advertised_functions(workers))
    offered = ", ".join(functions[:SHOWN_FUNCTIONS]) + more(len(functions) - SHOWN_FUNCTIONS)
    alive = f"{len(hosts)} live worker{'s' if len(hosts) > 1 else ''} ({shown})"
    return f"{alive} offer{'' if len(hosts) > 1 else 's'} functions: {offered or 'none'}"


def more(hidden: int) -> str:
    return f" and {hidden} more" if hidden > 0 else ""


def stack_workers(settings: Settings) -> dict[str, WorkerCapabilities]:
    """The capabilities of the live workers of the stack ``settings`` name (a configured
    Redis, or a running ``dagwright up``), read once within ``STACK_READ_TIMEOUT_S``;
    none without a stack or when it does not answer (the submit says why, later)."""
    import redis

    from dagwright.connection import connect, resolve_redis_url
    from dagwright.keys import Keys

    url = resolve_redis_url(settings)
    if not url:
        return {}
    try:
        client = connect(
            url,
            settings.redis,
            socket_timeout=STACK_READ_TIMEOUT_S,
            socket_connect_timeout=STACK_READ_TIMEOUT_S,
        )
        try:
            entries = client.hgetall(Keys(settings.redis.key_prefix).worker_capabilities)
        finally:
            client.close()
    except (redis.RedisError, OSError):
        return {}
    return live_entries(entries, time.time())
