"""Who pulls a queue's nodes, and which ready nodes get a message: the split every
dispatch of many nodes makes (a fan-out's release by a worker, execution/pool.py; a new
run's roots, control/submission.py). See execution/pool.py for the pulled fan-outs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from dagwright.orchestrator.broker import Broker, dispatch
from dagwright.orchestrator.control.runnable import LiveCapabilities
from dagwright.orchestrator.runstate.machine import ReadyNode
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


# A new run with more roots than this has them split as a fan-out's release is: a
# message for each idle pulling slot, the rest pooled for the workers to pull. Fewer go
# out as a message each, without a reading of the workers' slots.
POOL_ROOTS_PAST = 8
# Roots pooled per step (pool.lua: a few commands a node), so that no step of a run of
# thousands of roots holds the server long.
POOL_CHUNK = 500


def dispatch_roots(runtime: Runtime, broker: Broker, run_id: str, ready: list[ReadyNode]) -> None:
    """Dispatch a new run's roots: a run of many (a plan of independent nodes) wakes its
    queues' idle pulling slots and pools the rest, as a big fan-out's release does, where
    a message each cost the broker and the submitter ~1 ms a node. The pool is filled
    before the wake-up messages go out, so a woken worker finds it; nodes not pooled yet
    when the submitter dies are still in the outbox, for the reconciler to publish."""
    if len(ready) <= POOL_ROOTS_PAST:
        dispatch(broker, runtime.machine, ready)
        return
    publish, pool = wake_or_pool(ready, PullingSlots(runtime).of, None, QueueBacklog(broker).of)
    for first in range(0, len(pool), POOL_CHUNK):
        runtime.machine.pool(run_id, pool[first : first + POOL_CHUNK])
    dispatch(broker, runtime.machine, publish)
