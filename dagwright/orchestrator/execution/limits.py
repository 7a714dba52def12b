"""Concurrency limits by key, global across workers: nodes per worker type, nodes per run.

Each limit is a semaphore in Redis (``keys.limit_holders``/``limit_waiters``/
``limit_woken``; Lua in ``lua/slots_*.lua``). A claimed node takes a slot of each of its
limits in one script, all or nothing, before its worker runs; refused, it is *parked*:
back to QUEUED under the same fence with its attempt given back (``park.lua``), its
message acknowledged and its worker slot freed, and it waits in the limit's waiters in the
order it first asked. When a slot frees (the node's outcome is recorded, or the
reconciler finds a holder whose worker died and stopped renewing it), the head waiters
that now fit are published again.

Each limit's keys have a hash tag of their own (``{limits:<name>}``). On one server a
node's limits are taken in one script, all at once; on a Redis Cluster each step names one
limit (decision 117): the node takes its limits in a fixed order (run, type, key), gives
back what it took if one refuses, and lists them in the registry (another slot) after
its steps. A worker dying between the steps leaves slots nobody renews: they expire, and
the reconciler's pass over the registry wakes who waits for them.

Rejected: holding the message in the worker until a slot frees (it would occupy a worker
slot that other queues' nodes could use, and a prefetched message is invisible to the
other workers); Celery's ``rate_limit`` (per worker, not global); a counter without
waiters (a busy queue would starve the nodes that were refused first).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from dagwright.keys import Keys
from dagwright.models import ConcurrencyKey
from dagwright.orchestrator.broker import Broker, dispatch
from dagwright.orchestrator.runstate.machine import Dispatch, ReadyNode
from dagwright.orchestrator.runtime import Runtime
from dagwright.redis_scripts import is_cluster_client, load_script, lua_source, named_reply
from dagwright.settings import Settings

log = logging.getLogger(__name__)

SCRIPTS = ("acquire", "wake", "drop", "renew")
OPEN_RUN = ("running", "planning")
MAX_DROP_ROUNDS = 100  # stale waiters dropped per wake-up; the reconciler does the rest


PACKAGE = "dagwright.orchestrator.execution"


def _slots_prelude() -> str:
    return lua_source(PACKAGE, "slots_prelude")


@dataclass(frozen=True)
class Limit:
    """One semaphore: ``type:<worker type>``, ``run:<run id>`` or ``key:<a node's
    concurrency key>``, and its size."""

    name: str
    size: int


@dataclass(frozen=True)
class Slots:
    """The limits a claimed node needs a slot of, the run's first."""

    run_id: str
    node_id: str
    fence: int
    limits: tuple[Limit, ...]

    @property
    def waiter(self) -> str:
        return f"{self.run_id}/{self.node_id}"

    @property
    def holder(self) -> str:
        # The fence tells a zombie's slot from its node's next execution.
        return f"{self.waiter}@{self.fence}"


@dataclass(frozen=True)
class Waiter:
    """A parked node that may take a slot of ``limit`` now."""

    limit: str
    run_id: str
    node_id: str

    @classmethod
    def from_row(cls, row: Sequence[str]) -> Waiter:
        """One ``{limit name, "<run>/<node>"}`` row of a wake or drop reply."""
        limit, member = row
        run_id, _, node_id = member.partition("/")
        return cls(limit, run_id, node_id)


@dataclass(frozen=True)
class SlotsTaken:
    """The answer of ``slots_acquire.lua``: a slot of every limit (``taken``: the names
    this call took, not held already), or ``waits_for`` the limit the node now waits for."""

    waits_for: str | None
    taken: tuple[str, ...] = ()

    @classmethod
    def from_reply(cls, reply: Any) -> SlotsTaken:
        fields = named_reply(reply)
        if fields["status"] != "ok":
            return cls(waits_for=str(fields["limit"]))
        return cls(waits_for=None, taken=tuple(str(name) for name in fields["taken"]))


@dataclass(frozen=True)
class Taking:
    """What ``NodeLimits.take`` did: ``waits_for`` the limit the node now waits for (None:
    it holds a slot of every limit), and the waiters ``woken`` by what it gave back (on a
    Cluster it may hold a slot for a moment before a later limit refuses it)."""

    waits_for: str | None
    woken: tuple[Waiter, ...] = ()


@dataclass(frozen=True)
class Woken:
    """A wake or drop reply: the waiters that may take a slot now, and (on a Cluster) the
    limits it left empty, for the registry."""

    waiters: list[Waiter]
    emptied: list[str]

    @classmethod
    def from_reply(cls, reply: Any) -> Woken:
        fields = named_reply(reply)
        waiters = [Waiter.from_row(row) for row in fields["waiters"]]
        return cls(waiters, [str(name) for name in fields.get("empty") or []])


def waiters_of(reply: Any) -> list[Waiter]:
    """The waiters a wake or drop reply names."""
    return Woken.from_reply(reply).waiters


def node_limits(
    settings: Settings,
    run_id: str,
    node_id: str,
    fence: int,
    worker_type: str,
    run_max: int,
    node_key: ConcurrencyKey | None = None,
) -> Slots | None:
    """The limits that apply to a node; None if none does (no round trip then).
    ``node_key``: the node's own per-key limit (its key rendered at submit)."""
    limits = []
    if run_max > 0:
        limits.append(Limit(f"run:{run_id}", run_max))
    type_max = settings.throttles.concurrency_limits.get(worker_type)
    if type_max is not None:
        limits.append(Limit(f"type:{worker_type}", type_max))
    if node_key is not None:
        limits.append(Limit(f"key:{node_key.key}", node_key.limit))
    return Slots(run_id, node_id, fence, tuple(limits)) if limits else None


class NodeLimits:
    """The limits' scripts for one Redis client, and the slots this process holds (its
    lease thread renews them, see ``renew_held``)."""

    def __init__(self, client: redis.Redis, keys: Keys, *, slot_ttl_s: float, grace_s: float):
        self.client = client
        self.keys = keys
        self.slot_ttl_ms = int(slot_ttl_s * 1000)
        self.grace_ms = int(grace_s * 1000)
        self._scripts = {
            name: load_script(client, PACKAGE, f"slots_{name}", prelude=_slots_prelude)
            for name in SCRIPTS
        }
        self._cluster = is_cluster_client(client)
        self._held: dict[str, Slots] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_runtime(cls, runtime: Runtime) -> NodeLimits:
        settings = runtime.settings
        # Renewed every heartbeat; twice the lease, so one late renewal loses nothing.
        return cls(
            runtime.client,
            runtime.keys,
            slot_ttl_s=2 * settings.dispatch.lease_s,
            grace_s=settings.dispatch.publish_grace_s,
        )

    def _keys(self, limits: Sequence[Limit]) -> list[str]:
        keys = [self.keys.limits]
        for limit in limits:
            name = limit.name
            keys += [
                self.keys.limit_holders(name),
                self.keys.limit_waiters(name),
                self.keys.limit_woken(name),
            ]
        if self._cluster:  # one limit per step: its holders stand for the registry (prelude)
            keys[0] = keys[1]
        return keys

    def _run(self, script: str, limits: Sequence[Limit], *args: Any) -> Any:
        return self._scripts[script](keys=self._keys(limits), args=list(args))

    def _each(self, limits: Sequence[Limit]) -> list[Sequence[Limit]]:
        """The steps ``limits`` are taken in: all at once on one server, one by one on a
        Cluster (each limit its own slot)."""
        return [[limit] for limit in limits] if self._cluster else [limits]

    def acquire(self, slots: Slots) -> str | None:
        """Take a slot of every limit (None), or of none: the name of the limit the node
        now waits for. (``take`` says whom giving back a slot woke.)"""
        return self.take(slots).waits_for

    def take(self, slots: Slots) -> Taking:
        """Take a slot of every limit, or of none (``Taking``)."""
        if self._cluster:
            taking = self._take_in_steps(slots)
        else:
            taking = Taking(self._take_step(slots, slots.limits, "").waits_for)
        if taking.waits_for is None:
            with self._lock:
                self._held[slots.holder] = slots
        return taking

    def _take_step(self, slots: Slots, limits: Sequence[Limit], first: str) -> SlotsTaken:
        reply = self._run(
            "acquire", limits, slots.waiter, slots.holder, self.slot_ttl_ms, first, *_flat(limits)
        )
        return SlotsTaken.from_reply(reply)

    def _take_in_steps(self, slots: Slots) -> Taking:
        """On a Cluster: one limit per step, in ``slots.limits``' order (run, type, key);
        refused by one, the slots taken before it are given back and the node leaves the
        waiters of the later ones. The registry is written after the steps (so the
        reconciler's tidy, which re-checks after deleting, never loses a limit)."""
        asked = self._asked(slots)
        first = str(min(asked.values())) if asked else ""
        taken: list[Limit] = []
        for index, limit in enumerate(slots.limits):
            step = self._take_step(slots, [limit], first)
            if step.waits_for is not None:
                waited = [lim for lim in slots.limits[index + 1 :] if lim.name in asked]
                woken = self._give_back(slots, taken, waited)
                self._register([limit])
                return Taking(step.waits_for, tuple(woken))
            taken += [limit] if step.taken else []
        self._register(slots.limits)
        return Taking(None)

    def _asked(self, slots: Slots) -> dict[str, int]:
        """Where the node waits (one limit at most) and since when (epoch ms): it keeps
        that time wherever it waits next, as in the one-step script."""
        if len(slots.limits) < 2:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for limit in slots.limits:
            pipe.zscore(self.keys.limit_waiters(limit.name), slots.waiter)
        scores = zip(slots.limits, pipe.execute(), strict=True)
        return {limit.name: int(score) for limit, score in scores if score is not None}

    def _give_back(
        self, slots: Slots, taken: Sequence[Limit], waited: Sequence[Limit]
    ) -> list[Waiter]:
        """Free the slots this node took a moment ago and leave the waiters of the later
        limits it waited at; the waiters that may take their room now."""
        woken = self._wake(taken, slots.holder) if taken else []
        for limit in waited:
            woken += self.drop(Waiter(limit.name, slots.run_id, slots.node_id), limit.size)
        return woken

    def _register(self, limits: Sequence[Limit]) -> None:
        if limits:
            self.client.hset(self.keys.limits, mapping={lim.name: lim.size for lim in limits})

    def release(self, slots: Slots) -> list[Waiter]:
        """Free the node's slots; the waiters that may take them now."""
        with self._lock:
            self._held.pop(slots.holder, None)
        return self._wake(slots.limits, slots.holder)

    def wake(self, limits: Sequence[Limit]) -> list[Waiter]:
        """The waiters that may take a slot of ``limits`` now (expired holders dropped)."""
        return self._wake(limits, "") if limits else []

    def _wake(self, limits: Sequence[Limit], holder: str) -> list[Waiter]:
        replies = [
            Woken.from_reply(self._run("wake", step, holder, self.grace_ms, *_flat(step)))
            for step in self._each(limits)
        ]
        emptied = {name for reply in replies for name in reply.emptied}
        if emptied:
            self._tidy([limit for limit in limits if limit.name in emptied])
        return [waiter for reply in replies for waiter in reply.waiters]

    def drop(self, waiter: Waiter, size: int) -> list[Waiter]:
        """Forget a waiter whose node no longer waits; the waiters that may take its place."""
        limit = Limit(waiter.limit, size)
        member = f"{waiter.run_id}/{waiter.node_id}"
        reply = self._run("drop", [limit], member, self.grace_ms, limit.name, size)
        return self._woken([limit], reply)

    def _woken(self, limits: Sequence[Limit], reply: Any) -> list[Waiter]:
        """The waiters of a wake or drop reply; on a Cluster, the limits it left empty
        leave the registry."""
        woken = Woken.from_reply(reply)
        if woken.emptied:
            self._tidy([limit for limit in limits if limit.name in woken.emptied])
        return woken.waiters

    def _tidy(self, limits: Sequence[Limit]) -> None:
        """On a Cluster: out of the registry, then back in if a node took or waited for a
        slot meanwhile (its step came before this re-check, or it registers after it)."""
        self.client.hdel(self.keys.limits, *[limit.name for limit in limits])
        pipe = self.client.pipeline(transaction=False)
        for limit in limits:
            pipe.exists(self.keys.limit_holders(limit.name), self.keys.limit_waiters(limit.name))
        used = [limit for limit, count in zip(limits, pipe.execute(), strict=True) if count]
        self._register(used)

    def _renew(self, limits: Sequence[Limit], members: Sequence[str]) -> int:
        reply = self._run("renew", limits, self.slot_ttl_ms, *members)
        return int(named_reply(reply)["held"])

    def registered(self) -> list[Limit]:
        """Every limit with holders or waiters, with its size."""
        sizes = self.client.hgetall(self.keys.limits)
        return [Limit(name, int(size)) for name, size in sorted(sizes.items())]

    def renew_held(self) -> None:
        """Extend the slots of the nodes this process runs (called by its lease thread)."""
        with self._lock:
            held = list(self._held.values())
        if not held:
            return
        pairs = [(limit, slots.holder) for slots in held for limit in slots.limits]
        if not self._cluster:
            limits, members = [limit for limit, _ in pairs], [holder for _, holder in pairs]
            renewed = self._renew(limits, members)
        else:  # a step per limit, renewing every holder of it
            by_limit: dict[Limit, list[str]] = {}
            for limit, holder in pairs:
                by_limit.setdefault(limit, []).append(holder)
            renewed = sum(self._renew([lim] * len(hs), hs) for lim, hs in by_limit.items())
        if renewed < len(pairs):
            lost = len(pairs) - renewed
            log.warning("%d concurrency slot(s) expired while their node ran", lost)


def _flat(limits: Sequence[Limit]) -> list[str | int]:
    return [value for limit in limits for value in (limit.name, limit.size)]


def publish_waiters(
    runtime: Runtime, broker: Broker, limits: NodeLimits, waiters: list[Waiter]
) -> int:
    """Publish the parked nodes that may take a slot now; waiters whose node no longer
    waits (its run ended, or it ran) are dropped, which may let the next ones in. Returns
    how many were published."""
    published = 0
    sizes: dict[str, int] | None = None
    for _ in range(MAX_DROP_ROUNDS):
        if not waiters:
            break
        ready, stale = _still_waiting(runtime, waiters)
        dispatch(broker, runtime.machine, ready)
        published += len(ready)
        if stale and sizes is None:
            sizes = {limit.name: limit.size for limit in limits.registered()}
        waiters = [
            woken
            for waiter in stale
            if waiter.limit in (sizes or {})
            for woken in limits.drop(waiter, (sizes or {})[waiter.limit])
        ]
    return published


def _still_waiting(runtime: Runtime, waiters: list[Waiter]) -> tuple[list[ReadyNode], list[Waiter]]:
    """Split waiters into nodes to publish (queued in an open run) and stale ones; a node
    running now (claimed, taking its slot) is neither."""
    keys = runtime.keys
    pipe = runtime.client.pipeline(transaction=False)
    for waiter in waiters:
        pipe.hget(keys.run_key(waiter.run_id, "run"), "status")
        for column in ("state", "fence", "dispatch"):
            pipe.hget(keys.run_key(waiter.run_id, column), waiter.node_id)
    replies = pipe.execute()
    ready, stale = [], []
    for index, waiter in enumerate(waiters):
        status, state, fence, dispatch_json = replies[4 * index : 4 * index + 4]
        if status not in OPEN_RUN or state not in ("queued", "running"):
            stale.append(waiter)
        elif state == "queued":
            where = Dispatch.from_json(dispatch_json)
            ready.append(ReadyNode(waiter.run_id, waiter.node_id, int(fence), where))
    return ready, stale
