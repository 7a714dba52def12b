"""Refusing at submit a plan that no live worker can run.

The client validates a plan against its own registry; the workers have theirs, built
from their own settings. A function imported only by the submitting client, or an agent
type on workers without an LLM endpoint, used to be found out node by node, each
dead-lettered. The workers publish what they can run (workers/capabilities.py), and a
submit checks every node against them, with one line saying what is missing and where
to set it.

With no live worker at all nothing is refused: runs may be submitted before the workers
start (a deployment starting up, ``dagwright run`` starting its embedded stack after the
submit), and they wait in their queues. An older worker publishing no capabilities is
not seen here, so it never causes a refusal either (only the others can).

The capabilities are one hash, read in one round trip; a client reuses a reading for
``CAPABILITIES_FRESH_S`` (a burst of submits costs one), and reads again before refusing,
so a refusal never rests on a stale reading.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dagwright.errors import UnrunnablePlanError
from dagwright.keys import FUNCTION_QUEUE_TYPE_PREFIX, function_queue_type
from dagwright.models import Node, Plan
from dagwright.orchestrator.runtime import Runtime
from dagwright.planning.planner import PLANNER_TYPE
from dagwright.workers import FUNCTION_TYPE, WorkerRegistry
from dagwright.workers.capabilities import LLM_KINDS, WorkerCapabilities

CAPABILITIES_FRESH_S = 2.0  # how long a client reuses its reading of the capabilities


@dataclass(frozen=True)
class NodeNeed:
    """What a live worker must offer for a node to run."""

    worker_type: str  # or ``function:<queue>``, for a function declared with its own queue
    function: str | None = None  # ``function`` nodes: the function it calls
    llm: bool = False  # agents and the planner: an LLM endpoint


def needs_of_plan(plan: Plan, registry: WorkerRegistry) -> list[NodeNeed]:
    """The distinct needs of a plan's nodes, in the plan's order."""
    needs = (
        NodeNeed(
            worker_type=served_type(node, registry),
            function=node.function if node.type == FUNCTION_TYPE else None,
            llm=registry.get(node.type).kind in LLM_KINDS,
        )
        for node in plan.nodes
    )
    return list(dict.fromkeys(needs))


def served_type(node: Node, registry: WorkerRegistry) -> str:
    """What a worker that runs ``node`` serves: its type, or ``function:<queue>`` for a
    function declared with its own queue (the one its node is published to)."""
    if node.type != FUNCTION_TYPE:
        return node.type
    registered = registry.functions.get(node.function or "")
    if registered is None or registered.queue is None:
        return node.type
    return function_queue_type(registered.queue)


def needs_of_goal() -> list[NodeNeed]:
    """A goal is first planned: by the planner, which calls an LLM. (The plan it makes
    uses the worker types the planner was shown: the client's.)"""
    return [NodeNeed(worker_type=PLANNER_TYPE, llm=True)]


class LiveCapabilities:
    """The capabilities of the live workers, hostname -> capabilities, read briefly cached."""

    def __init__(self, runtime: Runtime, clock: Callable[[], float] = time.time) -> None:
        self.runtime = runtime
        self.clock = clock
        self._reading: dict[str, WorkerCapabilities] = {}
        self._read_at = float("-inf")

    def read(self, *, fresh: bool = False) -> dict[str, WorkerCapabilities]:
        """The live workers' capabilities (entries not expired), at most
        ``CAPABILITIES_FRESH_S`` old unless ``fresh``."""
        now = self.clock()
        if fresh or now - self._read_at > CAPABILITIES_FRESH_S:
            entries = self.runtime.client.hgetall(self.runtime.keys.worker_capabilities)
            self._reading = live_entries(entries, now)
            self._read_at = now
        return self._reading

    def require(
        self, needs: list[NodeNeed], client_imports: Iterable[str], client_llm: str = ""
    ) -> None:
        """UnrunnablePlanError if workers are live and none can meet some need.
        ``client_llm``: the variable this client reaches the models with, for the fix
        (``llm_assignment``)."""
        imports = list(client_imports)
        if not unmet(needs, self.read(), imports):
            return
        problems = unmet(needs, self.read(fresh=True), imports, client_llm=client_llm)
        if problems:
            raise UnrunnablePlanError(problems)


def live_entries(entries: dict[str, str], now: float) -> dict[str, WorkerCapabilities]:
    """The entries of the capabilities hash that have not expired."""
    live = {}
    for hostname, raw in entries.items():
        capabilities, expires_at = WorkerCapabilities.from_json(raw)
        if expires_at > now:
            live[hostname] = capabilities
    return live


def unmet(
    needs: list[NodeNeed],
    workers: dict[str, WorkerCapabilities],
    client_imports: list[str],
    *,
    client_llm: str = "",
) -> list[str]:
    """What no live worker offers, one sentence per kind of thing missing, naming each
    (none without workers)."""
    if not workers:
        return []
    live = list(workers.values())
    gaps: dict[Gap, list[str]] = {}
    for need in needs:
        found = gap(need, live, client_imports)
        if found is not None:
            names = gaps.setdefault(found[0], [])
            if found[1] not in names:
                names.append(found[1])
    return [
        describe(kind, names, live, client_imports, client_llm=client_llm)
        for kind, names in gaps.items()
    ]


class Gap(enum.Enum):
    """Kinds of thing a need can find missing from every live worker."""

    PLANNER = "planner"  # nothing serves the orchestrator queue
    TYPE_NOT_IMPORTED = "type not imported"  # a type from a module only the client imports
    TYPE_NOT_SERVED = "type not served"  # a type no worker consumes the queue of
    FUNCTION_QUEUE = "function queue"  # a function queue (queue=) no worker consumes
    FUNCTION = "function"  # a function no worker serving `function` has
    LLM = "llm"  # a type whose workers have no LLM endpoint


def gap(
    need: NodeNeed, workers: list[WorkerCapabilities], client_imports: list[str]
) -> tuple[Gap, str] | None:
    """What no worker offers for ``need``, and its name; None if one can run it."""
    if any(w.runs(need.worker_type, function=need.function, llm=need.llm) for w in workers):
        return None
    serving = [w for w in workers if need.worker_type in w.worker_types]
    if not serving:
        if need.worker_type == PLANNER_TYPE:
            return Gap.PLANNER, need.worker_type
        if need.worker_type.startswith(FUNCTION_QUEUE_TYPE_PREFIX):
            return Gap.FUNCTION_QUEUE, need.worker_type
        if unimported(workers, client_imports):
            return Gap.TYPE_NOT_IMPORTED, need.worker_type
        return Gap.TYPE_NOT_SERVED, need.worker_type
    if need.function is not None and not any(need.function in w.functions for w in serving):
        return Gap.FUNCTION, need.function
    return Gap.LLM, need.worker_type


def describe(
    kind: Gap,
    names: list[str],
    workers: list[WorkerCapabilities],
    client_imports: list[str],
    *,
    client_llm: str = "",
) -> str:
    """One sentence: what is missing, and where to set it."""
    quoted = ", ".join(repr(name) for name in names)
    several = len(names) > 1
    if kind is Gap.PLANNER:
        return (
            "no live worker serves the planner's queue: start one with "
            "`dagwright worker -t orchestrator` (or `dagwright up`)"
        )
    if kind is Gap.TYPE_NOT_SERVED:
        flags = " ".join(f"-t {name}" for name in names)
        return (
            f"no live worker serves worker type{'s' if several else ''} {quoted}: start one "
            f"with `dagwright worker {flags}`"
        )
    if kind is Gap.FUNCTION_QUEUE:
        queues = ", ".join(repr(name.removeprefix(FUNCTION_QUEUE_TYPE_PREFIX)) for name in names)
        flags = " ".join(f"-t {name}" for name in names)
        imports = " ".join(f"--import {module}" for module in client_imports) or "--import MODULE"
        return (
            f"no live worker serves function queue{'s' if several else ''} {queues}: start one "
            f"with `dagwright worker {flags} {imports}`"
        )
    if kind is Gap.LLM:
        return no_llm_endpoint(names, client_llm)
    what = "function" if kind is Gap.FUNCTION else "worker type"
    return (
        f"{what}{'s' if several else ''} {quoted} {'are' if several else 'is'} not registered "
        f"in any live worker: {where_to_import(workers, client_imports)}"
    )


def no_llm_endpoint(names: list[str], client_llm: str) -> str:
    """Workers without a way to the models: they read their environment when they start,
    so the fix is a restart with the variable set (this client's, if it has one). With
    none here either, the fix is to set it here first: a `dagwright run` that starts the
    local stack gives its workers this environment."""
    serving = " or ".join(repr(n) for n in names)
    if not client_llm:
        return (
            f"no live worker serving {serving} has an Anthropic API key or "
            "ANTHROPIC_BASE_URL, nor has this environment: set ANTHROPIC_API_KEY (or "
            "ANTHROPIC_BASE_URL, e.g. to `dagwright fake-llm`) and run again (workers read "
            "it when they start: restart `dagwright up` or other workers with it)"
        )
    variables = " and ".join(part.split("=", 1)[0] for part in client_llm.split(" "))
    return (
        f"no live worker serving {serving} has an Anthropic API "
        f"key or ANTHROPIC_BASE_URL, and workers read {variables} only when they start: "
        f"stop `dagwright up` (Ctrl-C) and start it again with "
        f"`{client_llm} dagwright up` (other workers: set {variables} in their environment "
        "and restart them)"
    )


def unimported(workers: list[WorkerCapabilities], client_imports: list[str]) -> list[str]:
    """The modules this client imports and no live worker does."""
    imported = {module for worker in workers for module in worker.imports}
    return [module for module in client_imports if module not in imported]


def where_to_import(workers: list[WorkerCapabilities], client_imports: list[str]) -> str:
    modules = unimported(workers, client_imports)
    flags = " ".join(f"--import {module}" for module in modules) or "--import MODULE"
    return (
        f"start the workers with `{flags}` (`dagwright up -I …`) "
        "or set DAGWRIGHT_IMPORTS in the workers' environment"
    )
