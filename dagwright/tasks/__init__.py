"""Celery tasks and workers: thin wrappers over the orchestrator's plain functions.

With ``dagwright.app`` this is the only package that imports Celery (and
``dagwright.schedules.cron``, celery's crontab parser alone).
"""

from dagwright.tasks.app_factory import build_app
from dagwright.tasks.beat import drop_entry, next_fire_at, run_beat, sync_entry
from dagwright.tasks.publish import CeleryBroker
from dagwright.tasks.worker import queues_for, run_worker

__all__ = [
    "CeleryBroker",
    "build_app",
    "drop_entry",
    "next_fire_at",
    "queues_for",
    "run_beat",
    "run_worker",
    "sync_entry",
]
