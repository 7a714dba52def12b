"""Firing one tick of a schedule.

Firing is idempotent per (schedule, tick): two beats, or a beat that crashed after
sending a tick and before recording it, fire one run at most, because the fire claims
``dw:schedule:<name>:tick:<tick>`` with ``SET NX`` before starting anything."""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime

from redis.exceptions import LockError

from dagwright.errors import UnknownRunError
from dagwright.orchestrator.broker import Broker
from dagwright.orchestrator.control.cancellation import cancel_run
from dagwright.orchestrator.control.submission import start_run
from dagwright.orchestrator.runstate.creation import DEPTH_FIELD, SCHEDULE_FIELD
from dagwright.orchestrator.runtime import Runtime
from dagwright.schedules.definition import (
    Catchup,
    Overlap,
    Schedule,
)
from dagwright.schedules.store import Fire, ScheduleStore, schedule_store


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
    lock = store.firing(name)  # one tick of a schedule at a time
    holding = lock.acquire()
    try:
        fire = Fire(tick, now, "skipped", reason="another tick of the schedule was firing")
        if holding:
            fire = decide(runtime, broker, store, schedule, tick, now, manual=manual)
        if fire.outcome == "start":
            run_id = start_scheduled_run(runtime, broker, schedule)
            fire = Fire(tick, now, "started", run_id=run_id, reason=fire.reason)
        store.record(name, fire)
    finally:
        if holding:
            with contextlib.suppress(LockError):  # held past its TTL: another took it
                lock.release()
    return fire


def start_scheduled_run(runtime: Runtime, broker: Broker, schedule: Schedule) -> str:
    """A run of ``schedule`` (a follow-up depth of 0: its own, not a follow-up's)."""
    return start_run(
        runtime,
        broker,
        schedule.run_request(),
        extra={SCHEDULE_FIELD: schedule.name, DEPTH_FIELD: 0},
    )


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
