"""The task beat sends for each tick of a schedule."""

from __future__ import annotations

import logging
from typing import cast

from celery import Task

from dagwright.app import DagwrightCelery
from dagwright.errors import DagwrightError
from dagwright.keys import SCHEDULE_FIRE_TASK
from dagwright.schedules.firing import fire_schedule, manual_tick
from dagwright.shown_ids import shown_id
from dagwright.tasks.env import execution_env

log = logging.getLogger(__name__)


def register_schedule_tasks(app: DagwrightCelery) -> None:
    @app.task(name=SCHEDULE_FIRE_TASK, bind=True, ignore_result=True, shared=False)
    def fire(self: Task, name: str, tick: str | None = None) -> dict[str, str]:
        """Fire one tick of schedule ``name``: start its run, or record why not."""
        env = execution_env(cast(DagwrightCelery, self.app))
        try:
            done = fire_schedule(env.runtime, env.broker, name, tick or manual_tick())
        except DagwrightError as exc:  # removed meanwhile, or its plan/goal is refused now
            shown = shown_id(name), shown_id(str(tick))  # beat's message, or anyone's
            log.error("schedule %s: tick %s did not start a run: %s", *shown, exc)
            return {"outcome": "error", "reason": str(exc)}
        log.info(
            "schedule %s: tick %s %s %s",
            name,
            shown_id(done.tick),
            done.outcome,
            done.run_id or done.reason,
        )
        return done.to_json()
