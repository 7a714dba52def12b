"""The only place a Celery app is built (docs/internals/celery.md).

Reliability settings and why:

- JSON only (tasks, results, events): pickle would be code execution for anyone who can
  write to Redis.
- acks_late + reject_on_worker_lost: a message is acknowledged after its node ran, and a
  worker process that dies hands it back at once (worker_lost_wait 1 s instead of 10: no
  result is awaited from the dead process, since outputs are recorded in Redis by the task
  itself). The node is then taken over without waiting for its lease. Fencing makes
  redelivery harmless.
- prefetch_multiplier 1: a worker holds no more messages than it has free slots, so long
  nodes do not starve their queue, and a killed worker strands at most one message per
  process (the reconciler publishes those nodes again).
- visibility_timeout far above any node's time limit: Redis never redelivers a live task.
  Dead workers are found by leases instead (seconds, not the visibility timeout), so
  kombu's restore of unacked messages is only a safety net and keeps its defaults.
- ignore_result: node outputs live in the run state, written once; no result backend copy.
- task events on: Flower shows every task.
- isolation: the control (pidbox) and event exchanges carry dagwright's own names
  (``keys.CONTROL_EXCHANGE``, ``keys.EVENT_EXCHANGE``): a Celery team's ``celery -A
  theirs control shutdown`` or ``inspect ping`` on the same broker, even the same
  database, never reaches dagwright's workers, and dagwright's revokes never reach theirs.
  Everything of dagwright's that broadcasts or listens (revoke on cancel, Flower, the
  eager nodes' task events) goes through this app, so through these names.
- the broker is reached as the state store is (``dagwright.redis_endpoint``): a
  ``rediss://`` URL gets ``broker_use_ssl`` from the ``redis_tls_*`` settings (kombu
  would otherwise connect without checking the certificate), a ``sentinel://`` URL
  becomes kombu's Sentinel transport with ``master_name``, and a URL without credentials
  gets ``redis_username`` / ``redis_password``.
- RabbitMQ (an ``amqp://`` broker URL, ``dagwright.brokers.amqp``): quorum queues
  (``task_default_queue_type``; Celery then sets a per-consumer prefetch, as quorum
  queues have no global one), and each consumer asks for a consumer timeout above the
  hard time limit, since messages are acknowledged late.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from celery import Celery
from celery.app.amqp import AMQP, Queues

from dagwright.brokers import BrokerKind, broker_kind
from dagwright.brokers.amqp import consumer_arguments
from dagwright.brokers.redis_lists import KOMBU_PRIORITY_STEPS, redis_priority
from dagwright.keys import (
    CONTROL_EXCHANGE,
    EVENT_EXCHANGE,
    EVENT_QUEUE_PREFIX,
    ORCHESTRATOR_QUEUE,
    Keys,
)
from dagwright.redis_endpoint import (
    credential_options,
    is_sentinel_url,
    parse_sentinel_url,
    sentinel_options,
    tls_options,
    uses_tls,
    with_credentials,
)
from dagwright.settings import Settings

# A node's own deadline (its timeout_s, kept by the lease keeper) comes first; Celery's
# soft limit (the task gets an exception) this much later, its hard kill later still.
SOFT_LIMIT_GRACE_S = 5
HARD_LIMIT_GRACE_S = 30


def celery_config(settings: Settings, broker_url: str) -> dict[str, Any]:
    """``broker_url`` as dagwright spells it (``kombu_url`` rewrites it for kombu)."""
    return {
        "broker_url": kombu_url(broker_url, settings),
        "broker_use_ssl": broker_tls(broker_url, settings),
        "broker_connection_retry_on_startup": True,
        **broker_options(broker_url, settings),
        "broker_pool_limit": 10,
        "task_serializer": "json",
        "result_serializer": "json",
        "event_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_acks_on_failure_or_timeout": True,
        "worker_prefetch_multiplier": 1,
        "worker_lost_wait": 1.0,
        "task_ignore_result": True,
        "result_backend": None,
        "task_default_queue": ORCHESTRATOR_QUEUE,
        "task_create_missing_queues": True,
        "task_soft_time_limit": settings.limits.max_timeout_s,
        "task_time_limit": settings.limits.max_timeout_s + HARD_LIMIT_GRACE_S,
        "worker_send_task_events": True,
        "task_send_sent_event": True,
        "control_exchange": CONTROL_EXCHANGE,
        "event_exchange": EVENT_EXCHANGE,
        "event_queue_prefix": EVENT_QUEUE_PREFIX,
        "worker_hijack_root_logger": False,
        "worker_redirect_stdouts": False,
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        # Schedules (celery-redbeat): entries and the beat lock in the state store.
        # Shown in beat's banner only: build_app gives redbeat its client. In kombu's
        # spelling, which the banner can mask (it cannot parse several Sentinel hosts).
        "redbeat_redis_url": kombu_url(settings.redis.url or broker_url, settings),
        "redbeat_redis_options": {},
        "redbeat_key_prefix": Keys(settings.redis.key_prefix).beat_prefix,
        "redbeat_lock_timeout": settings.beat.lock_timeout_s,
        "beat_max_loop_interval": settings.beat.interval_s,
        "beat_scheduler": "dagwright.tasks.beat:DagwrightScheduler",
    }


def broker_options(broker_url: str, settings: Settings) -> dict[str, Any]:
    """The settings that differ by broker: kombu's Redis transport options, or RabbitMQ's
    quorum queues (``dagwright.brokers.amqp``)."""
    if broker_kind(broker_url) is BrokerKind.AMQP:
        return {
            "broker_transport_options": {"connect_timeout": 5},
            "task_default_queue_type": "quorum",
            "task_create_missing_queue_type": "quorum",
            "worker_detect_quorum_queues": True,
        }
    return {
        "broker_transport_options": {
            "visibility_timeout": settings.visibility_timeout_s,
            "socket_timeout": 30,
            "socket_connect_timeout": 5,
            "socket_keepalive": True,
            "health_check_interval": 10,
            "priority_steps": list(KOMBU_PRIORITY_STEPS),
            **sentinel_transport_options(broker_url, settings),
        },
    }


class DagwrightQueues(Queues):
    """Celery's table of queues, with dagwright's consumer arguments on every queue it
    holds (on RabbitMQ: the consumer timeout, ``dagwright.brokers.amqp``)."""

    consumer_arguments: dict[str, Any] | None = None

    def __setitem__(self, name: str, queue: Any) -> None:
        if self.consumer_arguments and not queue.consumer_arguments:
            queue.consumer_arguments = dict(self.consumer_arguments)
        super().__setitem__(name, queue)


class DagwrightAMQP(AMQP):
    """Celery's messaging part, whose queues carry dagwright's consumer arguments."""

    queues_cls = DagwrightQueues

    def Queues(self, *args: Any, **kwargs: Any) -> DagwrightQueues:
        queues = super().Queues(*args, **kwargs)
        settings = getattr(self.app, "dagwright_settings", None)
        url = str(self.app.conf.broker_url or "")
        if settings is not None and broker_kind(url) is BrokerKind.AMQP:
            queues.consumer_arguments = consumer_arguments(settings.limits.max_timeout_s)
            for queue in queues.values():  # those added before the arguments were known
                queue.consumer_arguments = queue.consumer_arguments or queues.consumer_arguments
        return queues


class DagwrightCelery(Celery):
    """A Celery app that carries the dagwright settings it was built from, and, in a
    worker, the worker's node name (``name@host``: how Flower names it)."""

    amqp_cls = "dagwright.app:DagwrightAMQP"

    def __init__(self, settings: Settings, broker_url: str) -> None:
        super().__init__("dagwright", set_as_current=False)
        self.dagwright_settings = settings
        self.worker_name: str | None = None
        self.conf.update(celery_config(settings, broker_url))


def broker_priority(priority: int, broker_url: str) -> int:
    """A message's priority as the broker orders it, from dagwright's (1 to 5, higher
    first, and ``AGED_PRIORITY``, 6, above them): kombu's Redis transport serves its
    step 0 first, so 6 becomes 0, 5 becomes 1 and 1 becomes 5; RabbitMQ serves higher
    first (a quorum queue of RabbitMQ 4: 5 and above before the rest): sent as it is."""
    if broker_kind(broker_url) is BrokerKind.REDIS:
        return redis_priority(priority)
    return priority


def create_app(settings: Settings, broker_url: str) -> DagwrightCelery:
    """A Celery app configured for dagwright. Tasks are registered by ``dagwright.tasks``."""
    return DagwrightCelery(settings, broker_url)


def kombu_url(url: str, settings: Settings) -> str:
    """The broker URL in kombu's spelling: redis-py's ``unix:///path?db=N`` as
    ``redis+socket:///path``, ``sentinel://h1,h2/primary/db`` as one
    ``sentinel://h/db`` per Sentinel joined by ``;``, and the settings' credentials
    written in where the URL has none."""
    if broker_kind(url) is not BrokerKind.REDIS:
        return url  # RabbitMQ's credentials are its URL's: the redis_* settings are not
    credentials = credential_options(url, settings.redis)
    username, password = credentials.get("username"), credentials.get("password")
    if is_sentinel_url(url):
        return kombu_sentinel_url(url, username, password)
    url = with_credentials(url, username, password)
    parts = urlsplit(url)
    if parts.scheme != "unix":
        return url
    db = parse_qs(parts.query).get("db", ["0"])[0]
    return f"redis+socket://{parts.path}?virtual_host={db}"


def broker_identity(url: str) -> str:
    """Which broker a kombu URL (``kombu_url``) names, without its credentials: what a
    worker tells in its capabilities and ``doctor`` compares with its own. The scheme,
    hosts, database and ``virtual_host`` of each ``;``-joined URL; nothing else of a query."""
    return ";".join(identity_of_one(part) for part in url.split(";"))


def identity_of_one(url: str) -> str:
    parts = urlsplit(url)
    hosts = parts.netloc.rpartition("@")[2]
    host = parse_qs(parts.query).get("virtual_host", [""])[0]
    return f"{parts.scheme}://{hosts}{parts.path}" + (f"?virtual_host={host}" if host else "")


def kombu_sentinel_url(url: str, username: str | None, password: str | None) -> str:
    target = parse_sentinel_url(url)
    username, password = target.username or username, target.password or password
    first, *others = (f"sentinel://{host}:{port}/{target.db}" for host, port in target.sentinels)
    # kombu takes the primary's credentials from the first URL only.
    return ";".join([with_credentials(first, username, password), *others])


def broker_tls(url: str, settings: Settings) -> dict[str, Any] | None:
    """``broker_use_ssl`` of a TLS broker URL (kombu passes it on to redis-py)."""
    return tls_options(settings.redis) if uses_tls(url) else None


def sentinel_transport_options(url: str, settings: Settings) -> dict[str, Any]:
    """kombu's Sentinel transport options: the primary's name, the Sentinels' password."""
    if not is_sentinel_url(url):
        return {}
    target = parse_sentinel_url(url)
    options: dict[str, Any] = {"master_name": target.primary_name}
    if kwargs := sentinel_options(settings.redis, target.tls):
        options["sentinel_kwargs"] = kwargs
    return options
