"""Stopping a run: a cancel (by a user, by a schedule's overlap policy) or its run timeout
(found by the reconciler). One Lua step records it (every open node CANCELLED, the run
final, nothing due); then, best effort, the work in flight is stopped: the workers of its
running nodes are told at once (``announce_stop``) and the messages of its queued nodes
revoked. Neither is needed for correctness: claims, renewals and fenced writes of a
stopped run all fail; they make the stop take effect in about a second, and free the
workers' slots, instead of at the next lease renewal or message.
"""

from __future__ import annotations

from dagwright.orchestrator.broker import Broker, dispatch, revoke
from dagwright.orchestrator.runstate.machine import Cancelled, StoppedWork
from dagwright.orchestrator.runtime import Runtime
from dagwright.orchestrator.stop_signals import announce_stop


def cancel_run(runtime: Runtime, broker: Broker, run_id: str, reason: str) -> Cancelled:
    """Cancel the run (a run already final is left as it is) and stop its work."""
    cancelled = runtime.machine.cancel(run_id, reason)
    if cancelled.stopped is not None:
        stop_work(runtime, broker, run_id, cancelled.stopped)
    if cancelled.stopped is None or not cancelled.stopped.tearing_down:
        runtime.forget_active(run_id)  # else the reconciler keeps its teardown in time
    return cancelled


def stop_work(runtime: Runtime, broker: Broker, run_id: str, stopped: StoppedWork) -> None:
    """Stop what a stopped run still has in flight: queued messages and running nodes.
    The revoke goes first: a worker whose node stops takes its next message at once, and
    should know by then that it is revoked. A run left open for its teardown nodes has
    them published, and only the nodes stopped are named to the workers (its running
    teardown nodes go on)."""
    revoke(broker, stopped.queued)
    dispatch(broker, runtime.machine, stopped.teardown)
    if stopped.running:
        only = stopped.running if stopped.tearing_down else None
        announce_stop(runtime.client, runtime.keys, run_id, only)
