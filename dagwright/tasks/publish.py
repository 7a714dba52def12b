"""The Celery implementation of the orchestrator's Broker protocol."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from celery import Celery

from dagwright.app import HARD_LIMIT_GRACE_S, SOFT_LIMIT_GRACE_S, broker_priority
from dagwright.brokers import BrokerKind, QueueReader, broker_kind
from dagwright.brokers.amqp import AmqpQueues
from dagwright.brokers.redis_lists import RedisQueues
from dagwright.connection import not_redis, speaks_no_redis
from dagwright.keys import QUEUE_PREFIX, node_task_id
from dagwright.orchestrator.runstate.machine import Dispatch, ReadyNode

log = logging.getLogger(__name__)

# Redis commands per pipeline (a message and its task-sent event are two): small enough
# that the first nodes of a wide fan-out start while the rest are still being sent.
PUBLISH_BATCH_SIZE = 200


class CeleryBroker:
    def __init__(self, app: Celery) -> None:
        self.app = app

    def publish(self, nodes: list[ReadyNode]) -> list[ReadyNode]:
        """Publish ``dagwright.node.execute(run, node, fence)`` on each node's queue.

        The nodes go out in kombu batches (one pipeline per ``PUBLISH_BATCH_SIZE``
        commands, about 6x faster per message than one round trip each, which is what a
        wide fan-out costs); a single node too, whose message and task-sent event are
        then one round trip instead of two. The producer comes from the app's pool, so a
        publish sets up no connection. Returns the nodes known to be published; on a
        failure none of the batch counts as published, so the reconciler publishes them
        again (a message that did go out twice is dropped by its fence).
        """
        try:
            with (
                self.app.producer_or_acquire() as producer,
                producer.batch(max_size=PUBLISH_BATCH_SIZE),
            ):
                for node in nodes:
                    self._send(node, producer)
        except Exception as exc:
            if (wrong := speaks_no_redis(exc)) is not None:  # a setting to fix, not an outage
                url = self.app.conf.broker_url or ""
                raise not_redis(url, wrong, "DAGWRIGHT_BROKER_URL") from None
            log.warning("publishing %d node(s) failed", len(nodes), exc_info=True)
            return []
        return nodes

    def _send(self, node: ReadyNode, producer: object) -> None:
        limit = node.dispatch.time_limit_s
        self.app.send_task(
            node.dispatch.task,
            args=[node.run_id, node.node_id, node.fence],
            task_id=node_task_id(node.run_id, node.node_id, node.fence),
            queue=node.dispatch.queue,
            priority=broker_priority(node.dispatch.priority, self.app.conf.broker_url or ""),
            **readable_as(node),
            # dagwright's own deadline (the lease keeper) acts first, in every pool; these
            # end a node that ignores it, in the prefork pool.
            soft_time_limit=limit + SOFT_LIMIT_GRACE_S,
            time_limit=limit + HARD_LIMIT_GRACE_S,
            producer=producer,
        )

    def revoke(self, nodes: list[ReadyNode]) -> None:
        """Broadcast a revoke of the nodes' messages: a worker drops (and acknowledges) a
        revoked message when it arrives instead of running it. Workers keep revoked ids in
        memory; one started later refuses the message at claim instead."""
        ids = [node_task_id(node.run_id, node.node_id, node.fence) for node in nodes]
        self.app.control.revoke(ids)

    def queue_depth(self, queue: str) -> int | None:
        depths = self.queue_depths([queue])
        return None if depths is None else depths[queue]

    def queue_depths(self, queues: Sequence[str]) -> dict[str, int] | None:
        """Messages waiting in each of ``queues``, on a connection of the app's pool;
        None if the broker cannot tell (not one dagwright reads, or unreachable)."""
        try:
            with self.app.connection_or_acquire() as conn:
                reader = queue_reader(conn)
                return None if reader is None else reader.depths(queues)
        except Exception:
            log.warning("cannot read the depth of %s", ", ".join(queues), exc_info=True)
            return None

    def next_task_ids(self, queues: Sequence[str], depth: int) -> list[str]:
        """The task ids next in line ([] where the broker cannot look: RabbitMQ)."""
        try:
            with self.app.connection_or_acquire() as conn:
                reader = queue_reader(conn)
                return [] if reader is None else reader.next_task_ids(queues, depth)
        except Exception:
            log.warning("cannot read the messages waiting in %s", queues, exc_info=True)
            return []


def queue_reader(conn: Any) -> QueueReader | None:
    """The ``QueueReader`` over a kombu connection of the app's pool (None for a broker
    dagwright does not read)."""
    kind = broker_kind(f"{conn.transport.driver_type}://")  # "redis", "amqp"
    if kind is BrokerKind.REDIS:
        return RedisQueues(conn.default_channel.client)
    if kind is BrokerKind.AMQP:
        return AmqpQueues(conn)
    return None


def worker_type_of(dispatch: Dispatch) -> str:
    """The node's worker type; for runs that did not record it, its queue's name says."""
    return dispatch.worker_type or dispatch.queue.removeprefix(QUEUE_PREFIX)


def readable_as(node: ReadyNode) -> dict[str, str]:
    """How a node's message reads in Flower, worker logs and task events: its arguments as
    ``run=… node=… type=… fence=…``, so Flower's search finds a run's tasks by
    ``run=<id>`` and a worker type's by ``type=<name>`` (its task id, ``run.node.fence``,
    says the same).

    The task keeps its own name. A shadow name per worker type would make a neater name
    filter, but Celery's task-sent event always carries the real name and Flower keeps the
    name of whichever of task-sent and task-received reaches it last, so the name shown
    would flip between the two from one task to the next.
    """
    worker_type = worker_type_of(node.dispatch)
    return {
        "argsrepr": f"run={node.run_id} node={node.node_id} type={worker_type} fence={node.fence}",
        "kwargsrepr": "{}",
    }
