"""Broker messages written by hand: what a hostile or broken writer could put on a queue.

kombu's Redis transport keeps a queue as a list of JSON envelopes; ``envelope`` builds
one as kombu would, with whatever body, headers and content type a test chooses, and
``push`` puts any item on a queue's list, envelope or not.
"""

from __future__ import annotations

import base64
import bz2
import json
import uuid
from functools import cache
from typing import Any

import redis

from dagwright.keys import NODE_EXECUTE_TASK

CANARY = "s3cr3t-CANARY-7f1d"  # put in bodies: it must never reach a log or a dead letter


def task_headers(task: str = NODE_EXECUTE_TASK, **extra: Any) -> dict[str, Any]:
    """The headers of a Celery protocol 2 task message."""
    task_id = str(uuid.uuid4())
    return {
        "lang": "py",
        "task": task,
        "id": task_id,
        "root_id": task_id,
        "parent_id": None,
        "retries": 0,
        "timelimit": [None, None],
        **extra,
    }


def envelope(
    body: bytes,
    *,
    queue: str,
    content_type: str = "application/json",
    content_encoding: str = "utf-8",
    headers: Any = None,
) -> str:
    """A kombu Redis envelope around ``body`` (base64, as kombu writes it)."""
    return json.dumps(
        {
            "body": base64.b64encode(body).decode(),
            "content-encoding": content_encoding,
            "content-type": content_type,
            "headers": task_headers() if headers is None else headers,
            "properties": {
                "correlation_id": str(uuid.uuid4()),
                "delivery_mode": 2,
                "delivery_tag": str(uuid.uuid4()),
                "body_encoding": "base64",
                "delivery_info": {"exchange": queue, "routing_key": queue},
                "priority": 0,
            },
        }
    )


def push(broker: redis.Redis, queue: str, item: str | bytes) -> None:
    """Queue ``item`` as a producer would (kombu consumes a list from its right end)."""
    broker.lpush(queue, item)


@cache
def bz2_bomb(inflated_bytes: int = 1 << 30) -> bytes:
    """A bz2 body of well under a kilobyte that inflates to ``inflated_bytes`` zeros."""
    compressor = bz2.BZ2Compressor(9)
    chunk = bytes(1 << 20)
    parts = [compressor.compress(chunk) for _ in range(inflated_bytes // len(chunk))]
    return b"".join(parts) + compressor.flush()
