"""Schedules: goals or plans started on a cron expression or an interval, with no person
in the loop. A schedule is durable data in Redis (``dw:schedules``), not a config file;
celery beat's entries (``tasks/beat.py``) are derived from it.

Firing is idempotent per (schedule, tick): two beats, or a beat that crashed after
sending a tick and before recording it, fire one run at most, because the fire claims
``dw:schedule:<name>:tick:<tick>`` with ``SET NX`` before starting anything.
"""

from __future__ import annotations

import enum
import hashlib
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import redis
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dagwright.errors import ScheduleError, UnknownRunError
from dagwright.keys import Keys
from dagwright.models import Budget, Plan
from dagwright.orchestrator.broker import Broker
from dagwright.orchestrator.cancellation import cancel_run
from dagwright.orchestrator.planning import GoalOptions, requested_budget
from dagwright.orchestrator.runtime import Runtime
from dagwright.orchestrator.submission import start_run

HISTORY_MAX = 100  # fires kept per schedule
SCHEDULE_FIELD = "schedule"  # run hash: the schedule that started the run
DEPTH_FIELD = "followup_depth"  # run hash: 0 for a scheduled run, n for its n-th follow-up
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
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    cron: str | None = None  # five fields: minute hour day-of-month month day-of-week
    every_s: float | None = Field(None, ge=1)
    timezone: str = "UTC"
    goal: str | None = None
    plan: Plan | None = None
    worker_types: list[str] | None = None
    budget: Budget | None = None  # of each run
    budget_tokens: int | None = Field(None, ge=1)  # schedules stored before `budget`
    overlap: Overlap = Overlap.SKIP
    catchup: Catchup = Catchup.SKIP
    catchup_grace_s: float = Field(60.0, ge=0)
    max_followups: int = Field(0, ge=0, le=20)  # follow-up runs one run may queue (0: none)
    followup_depth: int = Field(1, ge=1, le=5)  # follow-ups of follow-ups, at most this deep
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


@dataclass(frozen=True)
class Fire:
    """One tick of a schedule and what it did."""

    tick: str
    fired_at: datetime
    outcome: str  # started, skipped
    run_id: str = ""
    reason: str = ""

    def to_json(self) -> dict[str, str]:
        return {
            "tick": self.tick,
            "fired_at": self.fired_at.isoformat(),
            "outcome": self.outcome,
            "run_id": self.run_id,
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, raw: str) -> Fire:
        data = json.loads(raw)
        return cls(**{**data, "fired_at": datetime.fromisoformat(data["fired_at"])})


class ScheduleStore:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    def save(self, schedule: Schedule) -> None:
        self.client.hset(self.keys.schedules, schedule.name, schedule.model_dump_json())

    def get(self, name: str) -> Schedule:
        raw = self.client.hget(self.keys.schedules, name)
        if raw is None:
            known = ", ".join(self.names()) or "none"
            raise ScheduleError(f"no schedule {name!r}; the schedules are: {known}")
        return Schedule.model_validate_json(raw)

    def names(self) -> list[str]:
        return sorted(self.client.hkeys(self.keys.schedules))

    def all(self) -> list[Schedule]:
        raw = self.client.hgetall(self.keys.schedules)
        return [Schedule.model_validate_json(raw[name]) for name in sorted(raw)]

    def delete(self, name: str) -> None:
        self.get(name)
        pipe = self.client.pipeline()
        pipe.hdel(self.keys.schedules, name)
        pipe.delete(self.keys.schedule_history(name))
        pipe.execute()

    def claim_tick(self, name: str, tick: str) -> bool:
        """True for the first fire of this tick only."""
        return bool(self.client.set(self.keys.schedule_tick(name, tick), 1, nx=True, ex=TICK_TTL_S))

    def record(self, name: str, fire: Fire) -> None:
        pipe = self.client.pipeline()
        pipe.lpush(self.keys.schedule_history(name), json.dumps(fire.to_json()))
        pipe.ltrim(self.keys.schedule_history(name), 0, HISTORY_MAX - 1)
        pipe.execute()

    def history(self, name: str, limit: int = 20) -> list[Fire]:
        raws = self.client.lrange(self.keys.schedule_history(name), 0, max(limit, 1) - 1)
        return [Fire.from_json(raw) for raw in raws]

    def last_run(self, name: str) -> str | None:
        """The run the schedule started last, if any (among the kept history)."""
        for fire in self.history(name, HISTORY_MAX):
            if fire.run_id:
                return fire.run_id
        return None


def schedule_store(runtime: Runtime) -> ScheduleStore:
    return ScheduleStore(runtime.client, runtime.keys)


def fire_schedule(
    runtime: Runtime, broker: Broker, name: str, tick: str, *, manual: bool = False
) -> Fire:
    """Fire one tick of a schedule (``manual``: run-now, which ignores pause and catch-up).
    Records and returns what it did; starts at most one run per tick."""
    store = schedule_store(runtime)
    schedule = store.get(name)
    now = datetime.now(UTC)
    if not manual and not store.claim_tick(name, tick):
        return Fire(tick, now, "skipped", reason="this tick was fired already")
    fire = decide(runtime, broker, store, schedule, tick, now, manual=manual)
    if fire.outcome == "start":
        run_id = start_run(
            runtime,
            broker,
            plan=schedule.plan,
            goal=schedule.goal,
            options=schedule.options(),
            extra={SCHEDULE_FIELD: name, DEPTH_FIELD: 0},
        )
        fire = Fire(tick, now, "started", run_id=run_id, reason=fire.reason)
    store.record(name, fire)
    return fire


def decide(
    runtime: Runtime,
    broker: Broker,
    store: ScheduleStore,
    schedule: Schedule,
    tick: str,
    now: datetime,
    *,
    manual: bool,
) -> Fire:
    """Whether a tick starts a run ("start") or is skipped, and why; cancels the previous
    run first under the ``cancel`` overlap policy."""
    if not manual and schedule.paused:
        return Fire(tick, now, "skipped", reason="the schedule is paused")
    late_s = lateness_s(tick, now)
    if not manual and schedule.catchup == Catchup.SKIP and late_s > schedule.catchup_grace_s:
        return Fire(tick, now, "skipped", reason=f"missed by {late_s:.0f}s (catch-up: skip)")
    previous = store.last_run(schedule.name)
    if previous is None or schedule.overlap == Overlap.ALLOW:
        return Fire(tick, now, "start")
    try:
        status = runtime.store.run_status(previous)
    except UnknownRunError:  # expired
        return Fire(tick, now, "start")
    if status.is_final:
        return Fire(tick, now, "start")
    if schedule.overlap == Overlap.SKIP:
        return Fire(tick, now, "skipped", reason=f"run {previous} is still {status.value}")
    cancel_run(runtime, broker, previous, f"cancelled by schedule {schedule.name!r}: a new tick")
    return Fire(tick, now, "start", reason=f"cancelled run {previous}")


def lateness_s(tick: str, now: datetime) -> float:
    """How late a tick (epoch seconds as text; anything else: on time) fires."""
    try:
        return max(now.timestamp() - float(tick), 0.0)
    except ValueError:
        return 0.0


def manual_tick() -> str:
    return f"manual-{time.time_ns()}"


# Follow-ups: a scheduled run's agents may propose goals to run next (the
# ``propose_followup`` tool); each becomes a run of its own, within the schedule's limits.

RESERVE_FOLLOWUP = """
local existing = redis.call('HGET', KEYS[1], ARGV[1])
if existing then return {'duplicate', existing} end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[2]) then return {'full', ''} end
redis.call('HSET', KEYS[1], ARGV[1], '')
redis.call('EXPIRE', KEYS[1], ARGV[3])
return {'ok', ''}
"""


def propose_followup(runtime: Runtime, broker: Broker, run_id: str, goal: str, reason: str) -> str:
    """Start ``goal`` as a follow-up run of ``run_id`` if its schedule allows one more;
    the same goal proposed again (a retried node) is the same follow-up. Returns what
    happened, for the model; ScheduleError saying why not."""
    fields = runtime.client.hmget(
        runtime.keys.run_key(run_id, "run"), [SCHEDULE_FIELD, DEPTH_FIELD]
    )
    name, depth = fields[0], int(fields[1] or 0)
    if not name:
        raise ScheduleError("follow-ups are for runs a schedule started; this run has none")
    store = schedule_store(runtime)
    schedule = store.get(name)
    if schedule.max_followups == 0:
        raise ScheduleError(f"schedule {name!r} allows no follow-up runs")
    if depth >= schedule.followup_depth:
        raise ScheduleError(
            f"this run is a follow-up {depth} deep; schedule {name!r} allows "
            f"{schedule.followup_depth}"
        )
    key = runtime.keys.run_followups(run_id)
    digest = hashlib.sha256(goal.strip().encode()).hexdigest()[:32]
    verdict, existing = runtime.client.eval(
        RESERVE_FOLLOWUP, 1, key, digest, schedule.max_followups, runtime.settings.retention_s
    )
    if verdict == "duplicate":
        return f"this follow-up was queued already: run {existing or '(starting)'}"
    if verdict == "full":
        raise ScheduleError(f"this run queued its {schedule.max_followups} follow-up(s) already")
    try:
        followup = start_run(
            runtime,
            broker,
            goal=goal,
            options=schedule.options(),
            extra={SCHEDULE_FIELD: name, DEPTH_FIELD: depth + 1},
        )
    except Exception:
        runtime.client.hdel(key, digest)  # not started: it may be proposed again
        raise
    runtime.client.hset(key, digest, followup)
    fire = Fire(
        f"followup-of-{run_id}",
        datetime.now(UTC),
        "started",
        run_id=followup,
        reason=f"follow-up of {run_id}: {reason}".rstrip(": "),
    )
    store.record(name, fire)
    return f"queued follow-up run {followup}"
