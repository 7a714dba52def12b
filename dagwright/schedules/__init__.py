"""Schedules: goals or plans started on a cron expression or an interval.

``definition`` (what a schedule is, checked before it is stored), ``cron`` (cron
expressions, parsed in the schedule's time zone), ``store`` (Redis),
``firing`` (one tick), ``followups`` (runs a scheduled run asks for). Beat itself, a
Celery process, is ``dagwright.tasks.beat``.
"""
