"""Stopping a run: a cancel (by a user, by a schedule's overlap policy) or its run timeout
(found by the reconciler). One Lua step records it (every open node CANCELLED, the run
final, nothing due); then, best effort, the work in flight is stopped: the workers of its
running nodes are told at once (``announce_stop``) and the messages of its queued nodes
revoked. Neither is needed for correctness: claims, renewals and fenced writes of a
stopped run all fail; they make the stop take effect in about a second, and free the
workers' slots, instead of at the next lease renewal or message. The team Celery tasks
of its ``celery_task`` nodes are left for the reconciler to revoke.
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
    leave_team_tasks_to_revoke(runtime, run_id)


def leave_team_tasks_to_revoke(runtime: Runtime, run_id: str) -> None:
    """Move the team Celery tasks of the run's cancelled ``celery_task`` nodes to the list
    the reconciler revokes through the team's app: this process may not have that app
    (execution/team_tasks.py). A teardown node's task (``run_if: always``, kept open by
    the stop) goes on."""
    client, keys = runtime.client, runtime.keys
    in_flight = client.hgetall(keys.team_tasks(run_id))
    if not in_flight:
        return
    nodes = list(in_flight)
    states = client.hmget(keys.run_key(run_id, "state"), nodes)
    stopped = [node for node, state in zip(nodes, states, strict=True) if state == "cancelled"]
    if not stopped:
        return
    with client.pipeline(transaction=False) as pipe:
        pipe.rpush(keys.team_task_revokes, *(in_flight[node] for node in stopped))
        pipe.hdel(keys.team_tasks(run_id), *stopped)
        pipe.execute()
