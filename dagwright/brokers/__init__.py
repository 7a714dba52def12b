"""The message broker behind Celery, read the same way whichever it is: Redis lists or
RabbitMQ (docs/internals/brokers.md).

Celery and kombu move the messages; what dagwright itself reads of the broker is small
and lives here: how many messages wait in a queue (metrics, ``doctor``, the fan-out
pool's backlog, the reconciler's stranded nodes), which task ids are next in line (the
fairness check), and whether the broker answers at all. Each broker has one module:
``redis_lists`` (kombu's Redis transport: a list per queue and priority step) and
``amqp`` (RabbitMQ: passive declares, the quorum queues' arguments). The state store is
never here: it is Redis or Valkey whichever broker carries the messages.

Rejected: reading RabbitMQ's queue depths through its management plugin (HTTP). It is an
optional plugin, a second port with its own credentials, and its numbers lag by its
collection interval; a passive ``queue.declare`` on the AMQP connection the workers use
anyway answers the ready count at once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from dagwright.settings import RedisSettings

# As dagwright spells Redis URLs (dagwright.redis_endpoint), plus kombu's socket spelling.
REDIS_SCHEMES = ("redis", "rediss", "unix", "sentinel", "sentinels", "redis+socket")
AMQP_SCHEMES = ("amqp", "amqps", "pyamqp")


class BrokerKind(Enum):
    REDIS = "redis"
    AMQP = "amqp"
    OTHER = "other"  # a kombu transport dagwright does not read (SQS...): depths unknown


def broker_kind(url: str) -> BrokerKind:
    """Which broker a URL names, by its scheme."""
    scheme = url.partition("://")[0].lower()
    if scheme in REDIS_SCHEMES:
        return BrokerKind.REDIS
    if scheme in AMQP_SCHEMES:
        return BrokerKind.AMQP
    return BrokerKind.OTHER


class QueueReader(Protocol):
    """What dagwright reads of a broker's queues. Each method raises the broker's own
    error when it cannot read: the caller decides what an unknown depth means."""

    def depths(self, queues: Sequence[str]) -> dict[str, int]:
        """Messages waiting (ready, not yet delivered) in each of ``queues``; a queue the
        broker does not have counts 0."""
        ...

    def next_task_ids(self, queues: Sequence[str], depth: int) -> list[str]:
        """Task ids of the next ``depth`` messages in line in each queue (at each
        priority), "" for a message without one; [] where the broker cannot look at a
        message without taking it."""
        ...


@contextmanager
def open_queue_reader(
    url: str, access: RedisSettings, *, timeout_s: float = 5.0
) -> Iterator[QueueReader | None]:
    """A reader of the broker at ``url`` with a connection of its own, closed after use
    (None for a broker dagwright does not read): for ``doctor`` and the metrics server,
    which have no Celery app. Connecting raises the broker's error."""
    kind = broker_kind(url)
    if kind is BrokerKind.REDIS:
        from dagwright.brokers.redis_lists import RedisQueues
        from dagwright.connection import connect

        client = connect(url, access, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
        try:
            yield RedisQueues(client)
        finally:
            client.close()
    elif kind is BrokerKind.AMQP:
        from dagwright.brokers.amqp import AmqpQueues, amqp_connection

        with amqp_connection(url, timeout_s=timeout_s) as connection:
            yield AmqpQueues(connection)
    else:
        yield None
