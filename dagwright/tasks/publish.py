"""The Celery implementation of the orchestrator's Broker protocol."""

from __future__ import annotations

import logging

from celery import Celery

from dagwright.app import HARD_LIMIT_GRACE_S
from dagwright.keys import NODE_EXECUTE_TASK
from dagwright.orchestrator.scheduler import ReadyNode

log = logging.getLogger(__name__)


class CeleryBroker:
    def __init__(self, app: Celery) -> None:
        self.app = app

    def publish(self, nodes: list[ReadyNode]) -> list[ReadyNode]:
        """Publish ``dagwright.node.execute(run, node, fence)`` on each node's queue, on one
        pooled connection. Stops at the first failure and returns what went out."""
        published: list[ReadyNode] = []
        try:
            with self.app.producer_or_acquire() as producer:
                for node in nodes:
                    self._send(node, producer)
                    published.append(node)
        except Exception:
            log.warning(
                "publish failed after %d of %d node(s)", len(published), len(nodes), exc_info=True
            )
        return published

    def _send(self, node: ReadyNode, producer: object) -> None:
        limit = node.dispatch.time_limit_s
        self.app.send_task(
            NODE_EXECUTE_TASK,
            args=[node.run_id, node.node_id, node.fence],
            queue=node.dispatch.queue,
            soft_time_limit=limit,
            time_limit=limit + HARD_LIMIT_GRACE_S,
            producer=producer,
        )

    def queue_depth(self, queue: str) -> int | None:
        try:
            with self.app.connection_for_write() as conn:
                try:
                    return int(
                        conn.default_channel.queue_declare(queue=queue, passive=True).message_count
                    )
                except conn.channel_errors:
                    return 0  # an empty queue does not exist on the Redis transport
        except Exception:
            log.warning("cannot read the depth of %s", queue, exc_info=True)
            return None
