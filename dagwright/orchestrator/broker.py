"""What the orchestrator needs from the message broker, as a protocol.

The Celery implementation lives in ``dagwright.tasks.publish``; the orchestrator never
imports Celery.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from dagwright.errors import ConfigurationError
from dagwright.orchestrator.runstate.machine import ReadyNode, RunStateMachine

log = logging.getLogger(__name__)


class Broker(Protocol):
    def publish(self, nodes: list[ReadyNode]) -> list[ReadyNode]:
        """Publish one message per node; return those that were published."""
        ...

    def queue_depth(self, queue: str) -> int | None:
        """Messages waiting in ``queue``, or None if the broker cannot tell."""
        ...

    def next_task_ids(self, queues: Sequence[str], depth: int) -> list[str]:
        """The task ids of the next ``depth`` messages in line in each of ``queues`` (at
        each priority), in one round trip; [] if the broker cannot tell. A message
        without a task id counts as ``""``."""
        ...

    def revoke(self, nodes: list[ReadyNode]) -> None:
        """Ask the workers to drop the messages of these nodes unrun (best effort)."""
        ...


def dispatch(broker: Broker, machine: RunStateMachine, nodes: list[ReadyNode]) -> None:
    """Publish queued nodes and confirm them. A node whose publish fails stays in the
    outbox, and the reconciler publishes it again: nothing is lost to a broker outage."""
    if not nodes:
        return
    try:
        published = broker.publish(nodes)
    except ConfigurationError:  # the broker URL names no Redis: retrying cannot help
        raise
    except Exception:
        log.warning(
            "publishing %d node(s) failed; the reconciler will retry", len(nodes), exc_info=True
        )
        return
    if published:
        machine.mark_published(published)


def revoke(broker: Broker, nodes: list[ReadyNode]) -> None:
    """Revoke the messages of nodes a stop found queued. A failure only costs a claim
    each: a message that still reaches a worker is refused at claim (its run is over)."""
    if not nodes:
        return
    try:
        broker.revoke(nodes)
    except Exception:
        log.warning("revoking %d message(s) failed; claims refuse them", len(nodes), exc_info=True)
