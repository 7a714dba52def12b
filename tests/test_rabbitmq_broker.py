"""RabbitMQ as the broker, the state staying in Valkey: what dagwright reads of the broker
(queue depths for the pool, the reconciler, metrics and ``doctor``) and how it declares
its queues and consumers (quorum queues, a consumer timeout above the longest node).

The spine, chaos, malformed-message and cancellation suites run on both brokers
(``broker_settings`` / ``broker_subprocess_settings`` in conftest); here are the parts
only RabbitMQ has. Against a private ``rabbitmq-server`` node the session starts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dagwright.app import broker_priority, celery_config, create_app, kombu_url
from dagwright.brokers import BrokerKind, broker_kind, open_queue_reader
from dagwright.brokers.amqp import CONSUMER_TIMEOUT_ARGUMENT, honours_consumer_timeout
from dagwright.doctor import Status, check_broker
from dagwright.metrics.readings import MetricsReader
from dagwright.registry import build_registry
from dagwright.settings import Settings
from dagwright.tasks import CeleryBroker, build_app
from tests.support.rabbitmq import VHOSTS, RabbitNode, purge_queues
from tests.support.raw_messages import RawParts, queue_raw
from tests.support.waiting import wait_until

AMQP_URL = "amqp://user:pw@rabbit.example:5672/dagwright"
QUEUE = "dw.function"


@pytest.fixture
def idle_vhost_settings(rabbitmq: RabbitNode, no_worker_settings: Settings) -> Iterator[Settings]:
    """Settings whose broker is a virtual host no worker consumes, its queues empty."""
    settings = no_worker_settings.model_copy(update={"broker_url": rabbitmq.url(VHOSTS[1])})
    purge_queues(settings.redis.broker_url or "", [QUEUE])
    yield settings
    purge_queues(settings.redis.broker_url or "", [QUEUE])


def test_an_amqp_broker_gets_quorum_queues_with_a_consumer_timeout_above_the_longest_node() -> None:
    settings = Settings(redis_url="redis://localhost:6379/0", max_timeout_s=7200)
    app = create_app(settings, AMQP_URL)
    assert app.conf.task_default_queue_type == "quorum"
    assert app.conf.task_create_missing_queue_type == "quorum"
    for name in ("dw.orchestrator", QUEUE):  # the default queue, and one made on demand
        queue = app.amqp.queues[name]
        assert queue.queue_arguments == {"x-queue-type": "quorum"}, name
        timeout_ms = queue.consumer_arguments[CONSUMER_TIMEOUT_ARGUMENT]
        assert timeout_ms > (7200 + 30) * 1000, name  # past the hard time limit
    redis_app = create_app(settings, "redis://localhost:6379/1")
    assert not redis_app.amqp.queues[QUEUE].consumer_arguments
    assert "priority_steps" in redis_app.conf.broker_transport_options
    assert "priority_steps" not in app.conf.broker_transport_options


def test_redis_credentials_are_never_written_into_an_amqp_url() -> None:
    settings = Settings(redis_username="ops", redis_password="redis-secret")
    assert kombu_url("amqp://rabbit.example:5672//", settings) == "amqp://rabbit.example:5672//"
    config = celery_config(settings, "amqp://rabbit.example:5672//")
    assert "redis-secret" not in str(config["broker_url"])


def test_priorities_go_to_rabbitmq_as_dagwright_numbers_them() -> None:
    assert [broker_priority(p, AMQP_URL) for p in (1, 3, 5, 6)] == [1, 3, 5, 6]
    assert [broker_priority(p, "redis://h/0") for p in (1, 3, 5, 6)] == [5, 3, 1, 0]


def test_broker_kinds_by_scheme() -> None:
    assert broker_kind("amqps://h//") is BrokerKind.AMQP
    assert broker_kind("pyamqp://h//") is BrokerKind.AMQP
    assert broker_kind("sentinel://h:26379/primary") is BrokerKind.REDIS
    assert broker_kind("sqs://") is BrokerKind.OTHER


def test_which_rabbitmq_versions_honour_the_consumer_timeout_argument() -> None:
    assert not honours_consumer_timeout("3.10.8")
    assert not honours_consumer_timeout("3.11.14")
    assert honours_consumer_timeout("3.11.15")
    assert honours_consumer_timeout("3.13.7")
    assert honours_consumer_timeout("4.0.5")


def test_queue_depths_on_rabbitmq_are_its_ready_messages(idle_vhost_settings: Settings) -> None:
    """The one reading every caller uses (the pool's backlog, the reconciler's empty
    queues, metrics, doctor): a queue nobody declared is 0, then the messages waiting."""
    settings = idle_vhost_settings
    broker = CeleryBroker(build_app(settings))
    assert broker.queue_depths(["dw.nobody-declared-this"]) == {"dw.nobody-declared-this": 0}
    queue_raw(settings.redis.broker_url or "", QUEUE, [RawParts(b"[]")] * 3)
    # A published message reaches a quorum queue through its Raft log: a moment later.
    wait_until(lambda: broker.queue_depth(QUEUE) == 3, timeout=15, what="3 messages waiting")
    with open_queue_reader(settings.redis.broker_url or "", settings.redis) as reader:
        assert reader is not None and reader.depths([QUEUE]) == {QUEUE: 3}
        assert reader.next_task_ids([QUEUE], 5) == []  # AMQP cannot look without taking
    readings = MetricsReader(
        settings,
        settings.redis.url or "",
        settings.redis.broker_url or "",
        build_registry(settings),
    ).read()
    assert readings.queue_depths is not None and readings.queue_depths[QUEUE] == 3


def test_doctor_checks_rabbitmq_and_names_the_consumer_timeout_an_old_one_needs(
    rabbitmq: RabbitNode, settings: Settings
) -> None:
    check = check_broker(rabbitmq.url(VHOSTS[1]), settings.redis, max_timeout_s=3600)
    # Debian's 3.10 ignores the per-consumer timeout: the server's own must be raised.
    assert check.status == Status.WARN, check
    assert "RabbitMQ 3.10" in check.detail and rabbitmq.password not in check.detail
    assert f"consumer_timeout = {(3600 + 120) * 1000}" in check.hint

    wrong = rabbitmq.url(VHOSTS[1]).replace(rabbitmq.password, "wrong-password")
    refused = check_broker(wrong, settings.redis)
    assert refused.status == Status.FAIL and "cannot reach RabbitMQ" in refused.detail
    assert "wrong-password" not in refused.detail
