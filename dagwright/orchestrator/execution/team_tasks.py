"""The run's record of the team tasks its ``celery_task`` nodes have in flight, and what
the reconciler does with it (``workers/team_tasks.py`` has the node's side).

A sent task's id sits in the run's ``team-tasks`` hash (node -> task id) from before it
is sent until it is settled. Each pass the reconciler reads the results of every task
listed there, in one batch per pass (``TeamApp.outcomes``), and makes the parked nodes
whose task has ended due at once, so a worker records the outcome within a pass; the
node's own poll (``celery_task_poll_s``) is the backstop should a pass miss it. A stop
(cancel, run timeout) moves the run's listed ids to ``team-tasks:revoke``, which the
reconciler drains through the team's app: the stopping process (a CLI, the API) need
not have that app.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from dagwright.orchestrator.runtime import Runtime
from dagwright.workers.team_tasks import TaskOutcome, TeamApp

log = logging.getLogger(__name__)

REVOKE_BATCH = 500  # task ids revoked per broadcast
# The record outlives the longest wait it may describe, and then some.
RECORD_TTL_MARGIN_S = 24 * 3600


class RecordedTeamTasks:
    """``TeamTasks`` for one node: the team's app, with the run's record kept."""

    def __init__(self, runtime: Runtime, app: TeamApp, run_id: str, node_id: str) -> None:
        self.runtime = runtime
        self.app = app
        self.run_id = run_id
        self.node_id = node_id

    def send(self, name: str, kwargs: dict[str, Any], task_id: str) -> None:
        """Record the task as in flight, then send it: a stop in between revokes an id
        that was never sent, which costs nothing."""
        keys, settings = self.runtime.keys, self.runtime.settings
        record = keys.team_tasks(self.run_id)
        with self.runtime.client.pipeline(transaction=False) as pipe:
            pipe.hset(record, self.node_id, task_id)
            pipe.expire(record, int(settings.retention.retention_s + RECORD_TTL_MARGIN_S))
            pipe.sadd(keys.team_task_runs, self.run_id)
            pipe.execute()
        self.app.send(name, kwargs, task_id)

    def outcome(self, task_id: str) -> TaskOutcome:
        return self.app.outcomes([task_id])[task_id]

    def revoke(self, task_id: str) -> None:
        self.app.revoke([task_id])

    def settle(self, task_id: str) -> None:
        self.runtime.client.hdel(self.runtime.keys.team_tasks(self.run_id), self.node_id)


def wake_ended_team_tasks(runtime: Runtime, app: TeamApp) -> int:
    """Make due every parked node whose team task has ended; drop from the watched set
    the runs with none in flight. Returns how many nodes were woken."""
    client, keys = runtime.client, runtime.keys
    runs = sorted(client.smembers(keys.team_task_runs))
    if not runs:
        return 0
    in_flight = _in_flight(runtime, runs)
    ended = _ended(app, [task_id for tasks in in_flight.values() for task_id in tasks.values()])
    woken = 0
    with client.pipeline(transaction=False) as pipe:
        for run_id, tasks in in_flight.items():
            if not tasks:
                pipe.srem(keys.team_task_runs, run_id)
            due: dict[str | bytes, float] = {
                node: 0 for node, task_id in tasks.items() if task_id in ended
            }
            if due:  # XX: only a node still parked; one that moved on is left alone
                pipe.zadd(keys.run_key(run_id, "retry"), due, xx=True)
                woken += len(due)
        pipe.execute()
    return woken


def _in_flight(runtime: Runtime, runs: list[str]) -> dict[str, dict[str, str]]:
    """Each run's listed team tasks, node -> task id (one round trip)."""
    with runtime.client.pipeline(transaction=False) as pipe:
        for run_id in runs:
            pipe.hgetall(runtime.keys.team_tasks(run_id))
        return dict(zip(runs, pipe.execute(), strict=True))


def _ended(app: TeamApp, task_ids: list[str]) -> set[str]:
    """The ids of the tasks that have ended (a backend that cannot be read ends none)."""
    if not task_ids:
        return set()
    try:
        outcomes = app.outcomes(task_ids)
    except Exception:
        log.warning("reading %d team task result(s) failed", len(task_ids), exc_info=True)
        return set()
    return {task_id for task_id, outcome in outcomes.items() if outcome.ready}


def revoke_left_team_tasks(runtime: Runtime, app: TeamApp) -> int:
    """Revoke, through the team's app, the tasks stopped runs left; returns how many."""
    client, key = runtime.client, runtime.keys.team_task_revokes
    task_ids: list[str] = client.lrange(key, 0, REVOKE_BATCH - 1)
    if not task_ids:
        return 0
    try:
        app.revoke(task_ids)
    except Exception:  # left listed: the next pass tries again
        log.warning("revoking %d team task(s) failed", len(task_ids), exc_info=True)
        return 0
    client.ltrim(key, len(task_ids), -1)
    log.info("revoked %d team task(s) of stopped runs", len(task_ids))
    return len(task_ids)


TeamAppFactory = Callable[[], TeamApp]
"""Builds the team's app on first use (imports it): only processes that need it do."""
