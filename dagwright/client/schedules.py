"""``client.schedules``: runs started on a cron expression or an interval.

The beat entries (``dagwright.tasks.beat``) bring Celery with them, so they are imported
only by the methods that change or read an entry: listing schedules' definitions does not.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagwright.client.redis_errors import SubClient
from dagwright.client.webhooks import coerce_webhooks
from dagwright.egress import EgressPolicy
from dagwright.errors import ScheduleError
from dagwright.models import Budget, Plan, RunStatus, Webhook
from dagwright.orchestrator.control.submission import check_plan, goal_inputs
from dagwright.planning.goals import plan_request, requested_budget
from dagwright.plans.files import coerce_plan
from dagwright.plans.run_inputs import bind_inputs
from dagwright.schedules.definition import Catchup, Overlap, Schedule, parse_schedule
from dagwright.schedules.firing import fire_schedule, manual_tick
from dagwright.schedules.store import Fire, schedule_store
from dagwright.webhooks.urls import check_webhooks

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class ScheduleInfo:
    """A schedule with what it did and will do."""

    schedule: Schedule
    next_fire_at: datetime | None
    history: builtins.list[Fire]  # newest first
    last_run_id: str | None
    last_run_status: RunStatus | None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.schedule.model_dump(mode="json", exclude_none=True),
            "next_fire_at": self.next_fire_at.isoformat() if self.next_fire_at else None,
            "last_run_id": self.last_run_id,
            "last_run_status": self.last_run_status.value if self.last_run_status else None,
            "history": [fire.to_json() for fire in self.history],
        }


class ScheduleClient(SubClient):
    """Add, list, pause, resume, remove and fire schedules (``client.schedules``)."""

    def add(
        self,
        name: str,
        *,
        cron: str | None = None,
        every_s: float | None = None,
        timezone: str = "UTC",
        goal: str | None = None,
        plan: Plan | dict[str, Any] | str | Path | None = None,
        worker_types: builtins.list[str] | None = None,
        budget: Budget | dict[str, Any] | None = None,
        budget_tokens: int | None = None,
        overlap: Overlap | str = Overlap.SKIP,
        catchup: Catchup | str = Catchup.SKIP,
        max_followups: int = 0,
        followup_depth: int = 1,
        replace: bool = False,
        inputs: dict[str, Any] | None = None,
        webhooks: Sequence[Webhook | dict[str, Any] | str] = (),
        llm_batch: bool = False,
        memory: str | None = None,
    ) -> Schedule:
        """Start ``goal`` or ``plan`` on a cron expression (in ``timezone``) or every
        ``every_s`` seconds, from the next tick on. Its runs' writers may queue up to
        ``max_followups`` follow-up runs each (``propose_followup``), follow-ups of
        follow-ups up to ``followup_depth`` deep. Each run is given ``inputs`` (checked
        now against the plan's ``inputs:`` schema, as a submit checks them: RunInputError).
        ``webhooks`` are told when each of its runs ends (as ``submit``'s); with
        ``llm_batch`` its runs' LLM calls go through the Message Batches API, at half
        the price, each answered within 24 hours. ``memory`` names the memory namespace
        its runs' agents share (else the plan's, else ``schedule:<name>``).
        ScheduleError if anything is invalid (nothing is stored then), or if the name is
        taken and not ``replace``."""
        from dagwright.tasks.beat import sync_entry

        schedule = parse_schedule(
            {
                "name": name,
                "cron": cron,
                "every_s": every_s,
                "timezone": timezone,
                "goal": goal,
                "plan": (
                    coerce_plan(
                        plan, max_file_bytes=self._client.settings.limits.max_plan_file_bytes
                    )
                    if plan is not None
                    else None
                ),
                "worker_types": worker_types,
                "budget": requested_budget(budget, budget_tokens),
                "overlap": overlap,
                "catchup": catchup,
                "max_followups": max_followups,
                "followup_depth": followup_depth,
                "inputs": inputs,
                "webhooks": coerce_webhooks(webhooks),
                "llm_batch": llm_batch,
                "memory": memory,
            }
        )
        self._check(schedule)
        store = schedule_store(self._client.runtime)
        if not replace and name in store.names():
            raise ScheduleError(f"a schedule {name!r} exists already: remove it, or replace it")
        store.save(schedule)
        sync_entry(self._client.app, schedule)
        return schedule

    def _check(self, schedule: Schedule) -> None:
        """What the tick would refuse, refused now: the cron, the plan, the goal."""
        from dagwright.schedules.cron import parse_cron

        if schedule.cron is not None:
            parse_cron(schedule.cron, schedule.timezone)
        runtime = self._client.runtime
        max_bytes = runtime.settings.limits.max_params_bytes
        egress = EgressPolicy.from_settings(runtime.settings)
        plan_hooks = schedule.plan.webhooks if schedule.plan else []
        check_webhooks([*plan_hooks, *schedule.webhooks], egress)
        if schedule.plan is not None:
            bound = bind_inputs(schedule.plan, schedule.inputs, max_bytes)
            check_plan(bound.plan, runtime.settings, runtime.registry)
        if schedule.goal is not None:
            goal_inputs(schedule.inputs, max_bytes)
            plan_request(runtime.settings, runtime.registry, schedule.goal, schedule.options())

    def list(self) -> builtins.list[ScheduleInfo]:
        """Every schedule, with its next fire time and its last fire."""
        schedules = schedule_store(self._client.runtime).all()
        return [self._info(schedule, 1) for schedule in schedules]

    def get(self, name: str, *, history: int = 20) -> ScheduleInfo:
        return self._info(schedule_store(self._client.runtime).get(name), history)

    def _info(self, schedule: Schedule, history: int) -> ScheduleInfo:
        from dagwright.tasks.beat import next_fire_at

        runtime = self._client.runtime
        fires = schedule_store(runtime).history(schedule.name, history)
        last_run = next((fire.run_id for fire in fires if fire.run_id), "")
        status = None
        if last_run and runtime.store.exists(last_run):
            status = runtime.store.run_status(last_run)
        return ScheduleInfo(
            schedule=schedule,
            next_fire_at=None if schedule.paused else next_fire_at(self._client.app, schedule.name),
            history=fires,
            last_run_id=last_run or None,
            last_run_status=status,
        )

    def pause(self, name: str) -> Schedule:
        """Stop firing (a paused schedule keeps its history; ``resume`` resumes)."""
        return self._set_paused(name, True)

    def resume(self, name: str) -> Schedule:
        """Fire again from the next tick (missed ticks follow the catch-up policy)."""
        return self._set_paused(name, False)

    def _set_paused(self, name: str, paused: bool) -> Schedule:
        from dagwright.tasks.beat import sync_entry

        store = schedule_store(self._client.runtime)
        schedule = store.get(name).model_copy(update={"paused": paused})
        store.save(schedule)
        sync_entry(self._client.app, schedule)
        return schedule

    def remove(self, name: str) -> None:
        from dagwright.tasks.beat import drop_entry

        schedule_store(self._client.runtime).delete(name)
        drop_entry(self._client.app, name)

    def run_now(self, name: str) -> Fire:
        """Fire the schedule once now, paused or not (its overlap policy still applies)."""
        client = self._client
        return fire_schedule(client.runtime, client.broker, name, manual_tick(), manual=True)
