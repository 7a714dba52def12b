"""The Celery app with dagwright's tasks registered on it."""

from __future__ import annotations

from dagwright.app import DagwrightCelery, create_app
from dagwright.connection import connect, redact_url, require_redis_url
from dagwright.errors import ConfigurationError
from dagwright.redis_endpoint import is_cluster_url
from dagwright.settings import Settings
from dagwright.tasks.node import register_tasks
from dagwright.tasks.schedule import register_schedule_tasks

# By name: only a worker loads it (and with it Celery's worker machinery).
GUARDED_CONSUMER = "dagwright.tasks.consumer:GuardedConsumer"
# The attribute where redbeat keeps its client (redbeat.schedulers.REDBEAT_REDIS_KEY).
REDBEAT_CLIENT_ATTRIBUTE = "redbeat_redis"


def build_app(settings: Settings) -> DagwrightCelery:
    """Resolve the Redis URL (configured, or a running local stack) and build the app."""
    url = require_redis_url(settings)
    settings = settings.model_copy(update={"redis_url": url})
    app = create_app(settings, broker_url_of(settings, url))
    app.conf.worker_consumer = GUARDED_CONSUMER  # a malformed message is dead-lettered
    # redbeat builds its own client from a URL, with neither Sentinel (in our spelling)
    # nor the TLS files and ACL user of the settings: it is given ours instead. The client
    # connects on first use, so an app that never schedules opens nothing.
    setattr(app, REDBEAT_CLIENT_ATTRIBUTE, connect(url, settings.redis))
    register_tasks(app)
    register_schedule_tasks(app)
    return app


def broker_url_of(settings: Settings, state_url: str) -> str:
    """The broker's URL: the setting, else the state store's, which may not be a cluster
    (kombu has no Redis Cluster transport): one line saying what to set instead."""
    broker = settings.redis.effective_broker_url or state_url
    if is_cluster_url(broker):
        raise ConfigurationError(
            f"the state store {redact_url(state_url)} is a Redis Cluster, which cannot be "
            "Celery's broker: set DAGWRIGHT_BROKER_URL to a plain Redis/Valkey "
            "(redis://...) or to RabbitMQ (amqp://...)"
        )
    return broker
