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

from dagwright.models import RunStatus
from dagwright.orchestrator.broker import Broker, dispatch
from dagwright.orchestrator.control.pulling import PullingSlots, QueueBacklog, wake_or_pool
from dagwright.orchestrator.runstate.machine import ReadyNode, RunStateMachine


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
