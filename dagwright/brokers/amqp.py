"""RabbitMQ as the broker: quorum queues, the consumer timeout, and reading queue depths.

Queues are quorum queues (``x-queue-type: quorum``, Celery's ``task_default_queue_type``):
replicated by Raft, so a node's message survives the loss of a RabbitMQ node, which a
classic queue's does not. What quorum queues do not have, and why dagwright does not miss
it: a channel-wide (global) prefetch (Celery 5.5+ detects the quorum queues and sets a
per-consumer prefetch); delayed messages (dagwright sends no ``eta``/``countdown``: a
run's countdowns and retry waits live in the run state, so Celery's native delayed
delivery topology is not declared); more than two priorities (RabbitMQ 4 serves priority
5 and above first, which is dagwright's 5 and its aged nodes; 3.x quorum queues ignore
priorities).

The consumer timeout: RabbitMQ closes the channel of a consumer that holds a delivery
unacknowledged longer than ``consumer_timeout`` (30 minutes by default), and dagwright
acknowledges a node's message after the node ran (late ack: a killed worker's message
comes back at once). So each dagwright consumer asks, with the ``x-consumer-timeout``
consumer argument, for the longest a message can be held: the app-wide hard time limit
and a margin. RabbitMQ 3.11.15 and later honour it; older servers ignore it and need
``consumer_timeout`` in rabbitmq.conf at least as long (docs/operations.md).

Rejected: acknowledging early and leaving recovery to dagwright's leases. It would work
(the reconciler re-queues a node whose lease expires), but a killed worker's node would
come back after its lease (seconds to a minute) instead of at once, and a worker would
reserve a further message per busy slot that nobody else could take meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

QUORUM_QUEUE_ARGUMENTS = {"x-queue-type": "quorum"}
CONSUMER_TIMEOUT_ARGUMENT = "x-consumer-timeout"
# Beyond the longest node timeout: Celery's hard-limit grace (app.HARD_LIMIT_GRACE_S, 30 s),
# the ack after a kill, a slow broker round trip.
CONSUMER_TIMEOUT_MARGIN_S = 120
CONNECT_TIMEOUT_S = 5.0


def consumer_arguments(max_timeout_s: float) -> dict[str, int]:
    """The ``basic.consume`` arguments of a dagwright consumer: how long RabbitMQ lets it
    hold a message unacknowledged (ms), given the longest node timeout
    (``Settings.max_timeout_s``)."""
    return {CONSUMER_TIMEOUT_ARGUMENT: int((max_timeout_s + CONSUMER_TIMEOUT_MARGIN_S) * 1000)}


def honours_consumer_timeout(version: str) -> bool:
    """Whether a RabbitMQ of ``version`` (``3.10.8``) honours ``x-consumer-timeout``
    (3.11.15 and later); an older one needs ``consumer_timeout`` in rabbitmq.conf."""
    parts = [int(part) if part.isdigit() else 0 for part in version.split(".")[:3]]
    return tuple(parts + [0] * (3 - len(parts))) >= (3, 11, 15)


class AmqpQueues:
    """The ``QueueReader`` of a RabbitMQ broker, over an open kombu connection."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def depths(self, queues: Sequence[str]) -> dict[str, int]:
        """The ready messages of each queue, by a passive ``queue.declare`` on a channel
        of its own (RabbitMQ closes the channel of one that names no queue: 0)."""
        return {queue: self._depth(queue) for queue in queues}

    def _depth(self, queue: str) -> int:
        channel = self.connection.channel()
        try:
            return int(channel.queue_declare(queue=queue, passive=True).message_count)
        except self.connection.channel_errors:
            return 0  # no such queue: no worker or publisher has declared it yet
        finally:
            channel.close()

    def next_task_ids(self, queues: Sequence[str], depth: int) -> list[str]:
        """[]: AMQP has no way to look at a waiting message without taking it."""
        return []


@contextmanager
def amqp_connection(url: str, *, timeout_s: float = CONNECT_TIMEOUT_S) -> Iterator[Any]:
    """A kombu connection to ``url``, connected (or the error), closed after use: for
    the processes that read the broker without a Celery app (``doctor``, metrics)."""
    import kombu  # only where a RabbitMQ broker is read: kombu costs an import

    connection = kombu.Connection(url, connect_timeout=timeout_s, transport_options={})
    try:
        connection.ensure_connection(max_retries=1, timeout=timeout_s)
        yield connection
    finally:
        connection.release()
