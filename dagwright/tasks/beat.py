"""celery beat for schedules, with celery-redbeat: entries and the beat lock live in Redis.

- One entry per schedule (``dw:beat:dw:<name>``), derived from the schedule in
  ``dw:schedules`` (the source of truth): written when a schedule is added, paused,
  resumed or removed, and all of them again when a beat starts.
- Only the beat holding the redbeat lock fires; the lock times out after
  ``beat_lock_timeout_s`` (a few seconds), so a crashed beat is replaced that fast by a
  standby one, which blocks on the lock until then.
- Each fire carries its tick (the time it was due, read before the entry moves on), and
  the fire task claims the tick before starting anything: a tick fired twice (two
  beats, a retried send) starts one run.
- redbeat stores a crontab without its timezone, so entries are rebuilt from the
  schedule itself when loaded (``schedules/cron.py``'s ``ZonedCrontab``).
"""

from __future__ import annotations

import contextlib
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from celery import Celery
from celery.schedules import crontab
from redbeat import RedBeatScheduler, RedBeatSchedulerEntry
from redbeat.schedulers import ensure_conf

from dagwright.connection import connect
from dagwright.errors import ScheduleError
from dagwright.keys import ORCHESTRATOR_QUEUE, SCHEDULE_FIRE_TASK, Keys
from dagwright.schedules.cron import celery_schedule
from dagwright.schedules.definition import Schedule
from dagwright.schedules.store import ScheduleStore
from dagwright.settings import Settings
from dagwright.tasks.app_factory import build_app
from dagwright.tasks.log_redaction import redact_logs_once_set_up

ENTRY_PREFIX = "dw:"
BEAT_RESTART_MAX_S = 5.0

log = logging.getLogger(__name__)


def entry_name(name: str) -> str:
    return ENTRY_PREFIX + name


def entry_key(app: Celery, name: str) -> str:
    """The Redis key of a schedule's beat entry."""
    ensure_conf(app)
    key: str = DagwrightEntry.generate_key(app, entry_name(name))
    return key


class DagwrightEntry(RedBeatSchedulerEntry):
    """A redbeat entry whose schedule is rebuilt from the dagwright schedule it fires."""

    @classmethod
    def from_key(cls, key: str, app: Celery | None = None) -> DagwrightEntry:
        entry = super().from_key(key, app=app)
        if entry.task == SCHEDULE_FIRE_TASK and entry.args and app is not None:
            try:
                entry.schedule = celery_schedule(schedules_of(app).get(entry.args[0]))
            except ScheduleError:
                entry.enabled = False  # removed meanwhile: the beat drops it at sync
        return entry


def beat_entry(app: Celery, schedule: Schedule) -> DagwrightEntry:
    return DagwrightEntry(
        name=entry_name(schedule.name),
        task=SCHEDULE_FIRE_TASK,
        schedule=celery_schedule(schedule),
        args=[schedule.name],
        options={"queue": ORCHESTRATOR_QUEUE},
        enabled=not schedule.paused,
        app=app,
    )


def sync_entry(app: Celery, schedule: Schedule) -> None:
    """Write the schedule's beat entry. A stored last fire time is kept (redbeat writes its
    meta only if absent); a new entry counts as fired now, so its first tick is the next
    one, not an immediate one."""
    entry = beat_entry(app, schedule)
    entry.last_run_at = datetime.now(UTC)
    entry.save()


def drop_entry(app: Celery, name: str) -> None:
    with contextlib.suppress(KeyError):
        DagwrightEntry.from_key(entry_key(app, name), app=app).delete()


def schedules_of(app: Celery) -> ScheduleStore:
    """The schedule store of the app's Redis (one client per app)."""
    store: ScheduleStore | None = getattr(app, "_dagwright_schedules", None)
    if store is None:
        settings = app.dagwright_settings
        store = ScheduleStore(
            connect(settings.redis.url or "", settings.redis), Keys(settings.redis.key_prefix)
        )
        app._dagwright_schedules = store
    return store


class DagwrightScheduler(RedBeatScheduler):
    Entry = DagwrightEntry

    def setup_schedule(self) -> None:
        super().setup_schedule()
        for schedule in schedules_of(self.app).all():  # the truth: restore their entries
            sync_entry(self.app, schedule)

    def apply_async(
        self, entry: Any, producer: Any = None, advance: bool = True, **kwargs: Any
    ) -> Any:
        if entry.task == SCHEDULE_FIRE_TASK:
            entry.kwargs = {**(entry.kwargs or {}), "tick": tick_of(entry)}
        return super().apply_async(entry, producer, advance, **kwargs)


def tick_of(entry: RedBeatSchedulerEntry) -> str:
    """The tick a fire is for, the same whichever beat sends it: an interval's due time
    (its last fire, from Redis, plus the interval: read before reserve() moves it on); a
    cron's minute (a cron fires at most once a minute, and its due time as celery
    computes it drifts with the moment it is asked)."""
    if isinstance(entry.schedule, crontab):
        return f"{int(time.time() // 60 * 60)}"
    due: datetime = entry.due_at
    return f"{due.timestamp():.3f}"


def next_fire_at(app: Celery, name: str) -> datetime | None:
    """When the schedule fires next (None: paused, or no beat entry yet)."""
    try:
        entry = DagwrightEntry.from_key(entry_key(app, name), app=app)
    except KeyError:
        return None
    if not entry.enabled:
        return None
    remaining: timedelta = entry.schedule.remaining_estimate(entry.last_run_at)
    return datetime.now(UTC) + remaining


def run_beat(settings: Settings, *, loglevel: str = "INFO") -> int:
    """Run beat in the foreground until it is stopped (a standby beat waits for the lock).
    Losing Redis does not end it: it starts again, and takes the lock once it can."""
    delay = 0.0
    redact_logs_once_set_up(settings)
    while True:
        app = build_app(settings)
        beat = app.Beat(
            scheduler=DagwrightScheduler, loglevel=loglevel, max_interval=settings.beat.interval_s
        )
        try:
            beat.run()  # returns when stopped (SIGTERM, Ctrl-C)
            return 0
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            delay = min(max(delay * 2, 0.5), BEAT_RESTART_MAX_S)
            log.warning("beat lost Redis (%s); starting again in %.1fs", exc, delay)
            time.sleep(delay)
        except redis.exceptions.LockError as exc:
            # The lock expired while Redis was away (its client reconnected within the
            # retries, but a restarted Redis kept no lock) or while this beat stalled:
            # another beat may hold it now. Start again, as a standby until it is free.
            log.warning("beat lost its lock (%s); starting again", exc)
