"""Pulled fan-outs: the nodes of a big fan-out wait in Redis for their workers to pull them.

When a success readies many nodes of one queue at once, a message for each costs the
broker, and each worker's main process, about a millisecond of CPU a node: on a small
machine that is the whole fan-out's time (Celery's chord pays it too). So only as many
messages go out as the queue has idle worker slots, to wake them (its pulling slots, less
this worker's and less the messages already waiting for one); the other nodes stay
queued in the run's pool (pool.lua). A worker that finishes a node of the run takes the next
one from the pool in the script that records its success (complete.lua) and runs it
next, eagerly: through its claim, with its fence, limits, lease and timeout (eager.py).

A fan-out wider than ``scripts.SETTLE_CHUNK`` is released in chunks: its success readies
the first chunk, and the pull that drains the pool releases the next one in the same
step (prelude.lua), so no step holds Valkey for long (other runs' submits and claims go
in between) and the release goes as fast as the workers pull (``release_rest`` when no
worker pulls).

Nothing is lost: a pulled node is in the outbox until its claim, and a pool nobody pulled
from for ``publish_grace_s`` is published by the reconciler (reconcile.lua). Nodes are
pooled only when every live worker of their queue pulls and told its slots: one that
does not (``eager_dispatch`` off, or an older version) would never take its share.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from dagwright.models import RunStatus
from dagwright.orchestrator.broker import Broker, dispatch
from dagwright.orchestrator.control.runnable import LiveCapabilities
from dagwright.orchestrator.runstate.machine import ReadyNode, RunStateMachine
from dagwright.orchestrator.runtime import Runtime

# How long a worker reuses its reading of a queue's backlog. A stale "busy" may pool a
# branch that an idle slot could have started: it runs after this worker's node, or is
# published once its pool has been idle for publish_grace_s.
BACKLOG_FRESH_S = 0.1


class PullingSlots:
    """How many live worker slots pull from each queue, from the workers' capabilities
    (read as a submit reads them: ``LiveCapabilities``, at most every few seconds)."""

    def __init__(self, runtime: Runtime, clock: Callable[[], float] = time.time) -> None:
        self.workers = LiveCapabilities(runtime, clock)

    def of(self, queue: str) -> int:
        """The slots pulling from ``queue``; 0 when a worker serving it does not pull or
        does not tell its slots (then every node gets its message)."""
        serving = [worker for worker in self.workers.read().values() if queue in worker.queues]
        if not serving or not all(worker.pulls and worker.slots > 0 for worker in serving):
            return 0
        return sum(worker.slots for worker in serving)


class QueueBacklog:
    """How many messages wait in a queue, as the broker says, reused for
    ``BACKLOG_FRESH_S``: in a burst, a step that readies nodes for other workers asks
    once per burst, not once per node (the hot path stays at 4 round trips)."""

    def __init__(self, broker: Broker, clock: Callable[[], float] = time.monotonic) -> None:
        self.broker = broker
        self.clock = clock
        self._readings: dict[str, tuple[int, float]] = {}

    def of(self, queue: str) -> int:
        """The messages waiting in ``queue`` (0 if the broker cannot tell)."""
        now = self.clock()
        depth, read_at = self._readings.get(queue, (0, float("-inf")))
        if now - read_at > BACKLOG_FRESH_S:
            depth = self.broker.queue_depth(queue) or 0
            self._readings[queue] = (depth, now)
        return depth


def wake_or_pool(
    ready: list[ReadyNode],
    slots: Callable[[str], int],
    kept: ReadyNode | None,
    backlog: Callable[[str], int] = lambda queue: 0,
) -> tuple[list[ReadyNode], list[ReadyNode]]:
    """Split nodes to dispatch into those to publish and those to pool: per queue, a
    message for each idle pulling slot, the rest pooled; every node is published where no
    slot pulls. Not idle: the slot of this worker, busy with ``kept``, and as many as the
    queue has messages waiting (its ``backlog``, asked only when a node would be pooled).
    A queue this worker does not run on next gets at least one message: one worker of the
    run must be there to pull."""
    by_queue: dict[str, list[ReadyNode]] = {}
    for node in ready:
        by_queue.setdefault(node.dispatch.queue, []).append(node)
    publish: list[ReadyNode] = []
    pool: list[ReadyNode] = []
    for queue, nodes in by_queue.items():
        pulling = slots(queue)
        if not pulling:
            publish += nodes
            continue
        runs_on = kept is not None and kept.dispatch.queue == queue
        idle = pulling - runs_on
        if len(nodes) > idle or runs_on:  # something may be pooled: ask how busy they are
            idle -= backlog(queue)
        wake = min(max(idle, 0 if runs_on else 1), len(nodes))
        publish += nodes[:wake]
        pool += nodes[wake:]
    return publish, pool


def dispatch_or_pool(
    broker: Broker,
    machine: RunStateMachine,
    slots: PullingSlots,
    backlog: QueueBacklog,
    ready: list[ReadyNode],
    kept: ReadyNode | None,
) -> int:
    """Dispatch the nodes a worker's step readied (and did not keep), pooling what
    ``wake_or_pool`` says; returns how many were pooled. The pool is filled before the
    wake-up messages go out, so a woken worker finds it; the nodes are all of one run
    (one step readied them)."""
    publish, pool = wake_or_pool(ready, slots.of, kept, backlog.of)
    if pool:
        machine.pool(pool[0].run_id, pool)
    dispatch(broker, machine, publish)
    return len(pool)


def _woken_already(queue: str) -> int:
    """The backlog a later chunk of a release assumes: the first chunk woke the idle
    slots, so only a queue this worker does not run on next gets a message."""
    return 1 << 30


def release_rest(
    broker: Broker,
    machine: RunStateMachine,
    slots: PullingSlots,
    run_id: str,
    kept: ReadyNode | None,
) -> RunStatus | None:
    """Release the rest of a big fan-out whose success released only its first chunk
    (``Advance.settling``) when none of it was pooled (no worker of its queue pulls, so
    none would ask for the next chunk): chunk after chunk (``machine.settle``), until
    none is left; the run's final status if the release ended it. Each chunk counts at
    least one dependent, so the loop ends; killed in between, the worker leaves the rest
    to the reconciler (nothing was lost: it is still to be counted)."""
    while True:
        advance = machine.settle(run_id)
        if advance is None:
            return None
        publish, pool = wake_or_pool(advance.ready, slots.of, kept, _woken_already)
        if pool:
            machine.pool(run_id, pool)
        dispatch(broker, machine, publish)
        if not advance.settling:
            return advance.run_finished
