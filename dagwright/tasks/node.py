"""The thin Celery tasks: unpack JSON arguments, call plain functions."""

from __future__ import annotations

from typing import Any, cast

from celery import Task

from dagwright.app import DagwrightCelery
from dagwright.keys import NODE_EXECUTE_TASK, PLAN_TASK, RECONCILE_TASK
from dagwright.orchestrator.execution.attempt import execute_node
from dagwright.tasks.env import execution_env, reconciler_for


def register_tasks(app: DagwrightCelery) -> None:
    @app.task(name=NODE_EXECUTE_TASK, bind=True, ignore_result=True, shared=False)
    def execute(self: Task, run_id: str, node_id: str, fence: int) -> str:
        """Run one node of one run, if ``fence`` is still its current fencing token."""
        env = execution_env(cast(DagwrightCelery, self.app))
        return execute_node(env, run_id, node_id, int(fence)).value

    @app.task(name=PLAN_TASK, bind=True, ignore_result=True, shared=False)
    def plan(self: Task, run_id: str, node_id: str, fence: int) -> str:
        """Run a planner node: turn the run's goal (or a failed branch) into nodes."""
        env = execution_env(cast(DagwrightCelery, self.app))
        return execute_node(env, run_id, node_id, int(fence)).value

    @app.task(name=RECONCILE_TASK, bind=True, ignore_result=True, shared=False)
    def reconcile(self: Task) -> dict[str, Any]:
        """One reconciler pass (for celery beat; workers also run it on a timer)."""
        report = reconciler_for(cast(DagwrightCelery, self.app)).run_once()
        return {"ran": report.ran, "requeued": report.requeued, "republished": report.republished}
