"""Queues of kombu's Redis transport: one list per queue and priority step.

kombu keeps one list per priority step and pops them in step order, 0 first (the
opposite of RabbitMQ's priorities, where higher comes first): one step per dagwright
priority (5 is step 1, the default 3 step 3, 1 step 5) and step 0, the list named as the
queue, for aged nodes (``AGED_PRIORITY``) and for messages without a priority (Celery's
own, an older client's): served first. A list is popped from its right end.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dagwright.models import AGED_PRIORITY, MIN_PRIORITY

if TYPE_CHECKING:
    import redis

KOMBU_PRIORITY_STEPS = tuple(range(AGED_PRIORITY - MIN_PRIORITY + 1))
KOMBU_PRIORITY_SEP = "\x06\x16"  # kombu's default, between a queue's name and its step


def priority_lists(queues: Sequence[str]) -> list[str]:
    """The Redis lists of ``queues``, one per kombu priority step, each queue's in turn."""
    return [
        f"{queue}{KOMBU_PRIORITY_SEP}{step}" if step else queue
        for queue in queues
        for step in KOMBU_PRIORITY_STEPS
    ]


def redis_priority(priority: int) -> int:
    """dagwright's priority (1 to 5, higher first; 6 for aged nodes) as kombu's step."""
    return AGED_PRIORITY - priority


class RedisQueues:
    """The ``QueueReader`` of a Redis broker, over a client of it (kombu's own channel
    client in a worker, a client of its own in ``doctor`` and the metrics server)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def depths(self, queues: Sequence[str]) -> dict[str, int]:
        """Each queue's lists of every priority step summed, as kombu's own queue size
        does: one pipeline of LLENs."""
        with self.client.pipeline(transaction=False) as pipe:
            for name in priority_lists(queues):
                pipe.llen(name)
            lengths = pipe.execute()
        steps = len(KOMBU_PRIORITY_STEPS)
        return {queue: sum(lengths[i * steps : (i + 1) * steps]) for i, queue in enumerate(queues)}

    def next_task_ids(self, queues: Sequence[str], depth: int) -> list[str]:
        """One pipeline of an LRANGE of the ``depth`` messages next in line per queue and
        priority step."""
        with self.client.pipeline(transaction=False) as pipe:
            for name in priority_lists(queues):
                pipe.lrange(name, -depth, -1)
            return [task_id_of(raw) for found in pipe.execute() for raw in found]


def task_id_of(raw: bytes | str) -> str:
    """The task id of a message as kombu's Redis transport stores it ("" if none)."""
    try:
        headers = json.loads(raw).get("headers") or {}
        return str(headers.get("id") or "")
    except (ValueError, AttributeError):
        return ""
