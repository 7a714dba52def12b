"""The thin Celery tasks: unpack JSON arguments, call plain functions."""

from __future__ import annotations

from typing import Any, cast

from celery import Task

from dagwright.app import DagwrightCelery
from dagwright.keys import NODE_EXECUTE_TASK, PLAN_TASK, RECONCILE_TASK
from dagwright.orchestrator.execution.attempt import execute_node
from dagwright.orchestrator.execution.eager import EagerSlot, eager_slot
from dagwright.tasks.deaths import DeathWatchRequest
from dagwright.tasks.eager_events import announce_eager_runs
from dagwright.tasks.env import execution_env, reconciler_for


def execute(self: Task, run_id: str, node_id: str, fence: int) -> str:
    """Run one node of one run, if ``fence`` is still its current fencing token.

    A planner node (the run's goal, or a failed branch, turned into nodes) is a node like
    any other; it has a task name of its own (on the orchestrator's queue) only so that
    the wire contract names what a message is for.
    """
    env = execution_env(cast(DagwrightCelery, self.app))
    eager = eager_slot_for(self)
    try:
        return execute_node(env, run_id, node_id, int(fence), eager).value
    finally:
        if eager is not None:
            app = cast(DagwrightCelery, self.app)
            announce_eager_runs(app, app.worker_name or self.request.hostname or "", eager.ran)


def eager_slot_for(task: Task) -> EagerSlot | None:
    """Room for a node this message's success readies, to run here without a message: on
    a queue this worker consumes, and within this message's soft time limit."""
    dispatch = cast(DagwrightCelery, task.app).dagwright_settings.dispatch
    if not dispatch.eager_dispatch:
        return None
    consumed = task.app.amqp.queues.consume_from
    _hard, soft = task.request.timelimit or (None, None)
    return eager_slot(
        consumed.keys() if consumed else None,
        soft,
        window_s=dispatch.batch_window(),
        max_batch=dispatch.batch_max_nodes,
    )


def register_tasks(app: DagwrightCelery) -> None:
    for name in (NODE_EXECUTE_TASK, PLAN_TASK):
        # The main process counts the deaths of the pool child running a node (poison).
        app.task(name=name, bind=True, ignore_result=True, shared=False, Request=DeathWatchRequest)(
            execute
        )

    @app.task(name=RECONCILE_TASK, bind=True, ignore_result=True, shared=False)
    def reconcile(self: Task) -> dict[str, Any]:
        """One reconciler pass (for celery beat; workers also run it on a timer)."""
        report = reconciler_for(cast(DagwrightCelery, self.app)).run_once()
        return {"ran": report.ran, "requeued": report.requeued, "republished": report.republished}
