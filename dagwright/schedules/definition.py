"""Schedules: goals or plans started on a cron expression or an interval, with no person
in the loop. A schedule is durable data in Redis (``dw:schedules``), not a config file;
celery beat's entries (``tasks/beat.py``) are derived from it.

The room: ``definition`` (what a schedule is, checked before it is stored), ``store`` (Redis),
``firing`` (one tick), ``followups`` (runs a scheduled run asks for).
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dagwright.errors import ScheduleError
from dagwright.models import (
    MAX_DURATION_S,
    MAX_PRIORITY,
    MAX_WEBHOOKS,
    MIN_PRIORITY,
    Budget,
    Plan,
    Webhook,
)
from dagwright.orchestrator.control.run_request import RunRequest
from dagwright.planning.goals import GoalOptions, requested_budget
from dagwright.settings import MEMORY_NAMESPACE_PATTERN

HISTORY_MAX = 100  # fires kept per schedule
TICK_TTL_S = 7 * 24 * 3600  # how long a fired tick is remembered
NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,62}$"


class Overlap(enum.StrEnum):
    """What a tick does while the schedule's previous run is still going."""

    SKIP = "skip"  # start nothing (the default)
    ALLOW = "allow"  # start another run alongside
    CANCEL = "cancel"  # cancel the previous run, then start


class Catchup(enum.StrEnum):
    """What a tick that fires late (nothing was running to fire it on time) does."""

    SKIP = "skip"  # start nothing if it is later than the grace (the default)
    ONCE = "once"  # start one run, however many ticks were missed


class Schedule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    name: str = Field(pattern=NAME_PATTERN)
    cron: str | None = None  # five fields: minute hour day-of-month month day-of-week
    every_s: float | None = Field(None, ge=1, le=366 * 24 * 3600)  # a year at most
    timezone: str = "UTC"
    goal: str | None = None
    plan: Plan | None = None
    worker_types: list[str] | None = None
    budget: Budget | None = None  # of each run
    budget_tokens: int | None = Field(None, ge=1)  # schedules stored before `budget`
    inputs: dict[str, Any] | None = None  # each run's inputs (the plan's defaults fill in)
    overlap: Overlap = Overlap.SKIP
    catchup: Catchup = Catchup.SKIP
    catchup_grace_s: float = Field(60.0, ge=0, le=MAX_DURATION_S)
    max_followups: int = Field(0, ge=0, le=20)  # follow-up runs one run may queue (0: none)
    followup_depth: int = Field(1, ge=1, le=5)  # follow-ups of follow-ups, at most this deep
    webhooks: list[Webhook] = Field(default_factory=list, max_length=MAX_WEBHOOKS)  # each end
    llm_batch: bool = False  # its runs' LLM calls through Message Batches, at half price
    priority: int | None = Field(None, ge=MIN_PRIORITY, le=MAX_PRIORITY)  # else its plan's, 3
    # the memory namespace of its runs' agents (else its plan's, else schedule:<name>)
    memory: str | None = Field(None, pattern=MEMORY_NAMESPACE_PATTERN)
    paused: bool = False
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @model_validator(mode="after")
    def _check(self) -> Schedule:
        if (self.cron is None) == (self.every_s is None):
            raise ValueError("give either a cron expression or an interval (every_s)")
        if (self.goal is None) == (self.plan is None):
            raise ValueError("give either a goal or a plan")
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown timezone {self.timezone!r}: use an IANA name such as Europe/Paris"
            ) from None
        return self

    @property
    def when(self) -> str:
        """The timing, for people."""
        if self.cron is not None:
            return f"cron {self.cron!r} ({self.timezone})"
        return f"every {self.every_s:g}s"

    def options(self) -> GoalOptions:
        return GoalOptions(
            worker_types=self.worker_types,
            budget=requested_budget(self.budget, self.budget_tokens),
        )

    def run_request(self) -> RunRequest:
        """What each tick of the schedule asks for: its plan or goal and their options."""
        return RunRequest(
            plan=self.plan,
            goal=self.goal,
            inputs=self.inputs,
            webhooks=tuple(self.webhooks),
            llm_batch=self.llm_batch,
            priority=self.priority,
            memory=self.memory,
            **self.goal_request_options(),
        )

    def followup_request(self, goal: str) -> RunRequest:
        """What a follow-up of one of its runs asks for: a goal, with its goal options."""
        return RunRequest(goal=goal, **self.goal_request_options())

    def goal_request_options(self) -> dict[str, Any]:
        """``options()`` as RunRequest's fields."""
        options = self.options()
        worker_types = tuple(options.worker_types) if options.worker_types is not None else None
        return {"worker_types": worker_types, "budget": options.budget}


def parse_schedule(data: dict[str, Any]) -> Schedule:
    """A Schedule from loose data; ScheduleError with every problem in one line."""
    try:
        return Schedule.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'schedule'}: {e['msg']}".replace(
                "Value error, ", ""
            )
            for e in exc.errors()
        )
        raise ScheduleError(f"invalid schedule: {problems}") from None
