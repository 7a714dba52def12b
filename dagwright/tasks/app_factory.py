"""The Celery app with dagwright's tasks registered on it."""

from __future__ import annotations

from dagwright.app import DagwrightCelery, create_app
from dagwright.connection import require_redis_url
from dagwright.settings import Settings
from dagwright.tasks.node import register_tasks
from dagwright.tasks.schedule import register_schedule_tasks

# By name: only a worker loads it (and with it Celery's worker machinery).
GUARDED_CONSUMER = "dagwright.tasks.consumer:GuardedConsumer"


def build_app(settings: Settings) -> DagwrightCelery:
    """Resolve the Redis URL (configured, or a running local stack) and build the app."""
    url = require_redis_url(settings)
    settings = settings.model_copy(update={"redis_url": url})
    app = create_app(settings, settings.effective_broker_url or url)
    app.conf.worker_consumer = GUARDED_CONSUMER  # a malformed message is dead-lettered
    register_tasks(app)
    register_schedule_tasks(app)
    return app
