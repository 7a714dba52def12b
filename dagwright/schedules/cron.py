"""Cron expressions: parsed and checked (``parse_cron``), read in the schedule's own time
zone (``ZonedCrontab``), and a schedule as the celery schedule beat fires it on.

Parsing is celery's crontab (``celery.schedules``, no app, no broker): the one place
outside ``tasks/`` that imports celery, loaded only when a cron is checked or fired.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from celery.schedules import BaseSchedule, crontab
from celery.schedules import schedule as interval

from dagwright.errors import ScheduleError
from dagwright.schedules.definition import Schedule


class ZonedCrontab(crontab):
    """A crontab read in its own timezone (celery's uses the app's, for every entry)."""

    def __init__(self, *args: Any, zone: str = "UTC", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.zone = ZoneInfo(zone)

    @property
    def tz(self) -> ZoneInfo:
        return self.zone

    def now(self) -> datetime:
        return datetime.now(self.zone)

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        return super().remaining_estimate(self._here(last_run_at))

    def is_due(self, last_run_at: datetime) -> Any:
        return super().is_due(self._here(last_run_at))

    def _here(self, moment: datetime) -> datetime:
        aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        return aware.astimezone(self.zone)


def celery_schedule(schedule: Schedule) -> BaseSchedule:
    """The celery schedule of a dagwright schedule; ScheduleError for a bad cron."""
    if schedule.every_s is not None:
        return interval(timedelta(seconds=schedule.every_s))
    return parse_cron(schedule.cron or "", schedule.timezone)


def parse_cron(expression: str, zone: str = "UTC") -> ZonedCrontab:
    fields = expression.split()
    if len(fields) != 5:
        raise ScheduleError(
            f"invalid cron expression {expression!r}: it needs 5 fields, "
            "minute hour day-of-month month day-of-week (e.g. '0 9 * * 1-5')"
        )
    minute, hour, day_of_month, month, day_of_week = fields
    try:
        cron = ZonedCrontab(minute, hour, day_of_week, day_of_month, month, zone=zone)
        cron.remaining_estimate(datetime.now(UTC))  # some errors show only when used
    except (ValueError, IndexError, KeyError) as exc:
        raise ScheduleError(f"invalid cron expression {expression!r}: {exc}") from None
    return cron
