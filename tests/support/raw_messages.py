"""Broker messages written by hand: what a hostile or broken writer could put on a queue.

kombu's Redis transport keeps a queue as a list of JSON envelopes; ``envelope`` builds
one as kombu would, with whatever body, headers and content type a test chooses, and
``push`` puts any item on a queue's list, envelope or not. ``queue_raw`` sends a message
of any shape on either broker (Redis, RabbitMQ).
"""

from __future__ import annotations

import base64
import bz2
import json
import uuid
from dataclasses import dataclass
from functools import cache
from typing import Any

import redis

from dagwright.brokers import BrokerKind, broker_kind, open_queue_reader
from dagwright.brokers.amqp import QUORUM_QUEUE_ARGUMENTS
from dagwright.keys import NODE_EXECUTE_TASK
from dagwright.settings import Settings

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


@dataclass(frozen=True)
class RawParts:
    """A message as any writer could send it, whatever the broker."""

    body: bytes
    content_type: str = "application/json"
    content_encoding: str = "utf-8"
    headers: Any = None  # None: a dagwright task's (task_headers())

    def headers_or_task(self) -> Any:
        return task_headers() if self.headers is None else self.headers


def queue_raw(broker_url: str, queue: str, messages: list[RawParts]) -> None:
    """Put ``messages`` on ``queue`` as a producer outside dagwright would: a kombu Redis
    envelope pushed on the list, or an AMQP message published to the quorum queue
    (declared as a dagwright worker declares it)."""
    if broker_kind(broker_url) is BrokerKind.REDIS:
        client = redis.Redis.from_url(broker_url)
        for m in messages:
            item = envelope(
                m.body,
                queue=queue,
                content_type=m.content_type,
                content_encoding=m.content_encoding,
                headers=m.headers_or_task(),
            )
            push(client, queue, item)
        return
    publish_amqp(broker_url, queue, messages)


def publish_amqp(broker_url: str, queue: str, messages: list[RawParts]) -> None:
    import kombu

    declared = kombu.Queue(
        queue, kombu.Exchange(queue, "direct"), queue, queue_arguments=QUORUM_QUEUE_ARGUMENTS
    )
    with kombu.Connection(broker_url, connect_timeout=5) as conn:
        channel = conn.channel()
        declared(channel).declare()
        producer = kombu.Producer(channel)
        for m in messages:
            producer.publish(
                m.body,
                exchange=queue,
                routing_key=queue,
                content_type=m.content_type,
                content_encoding=m.content_encoding,
                headers=m.headers_or_task(),
                serializer=None,
                compression=None,
            )
        channel.close()


def messages_waiting(settings: Settings, queue: str) -> int:
    """What the broker of ``settings`` says waits in ``queue`` (``dagwright.brokers``)."""
    with open_queue_reader(settings.redis.broker_url or "", settings.redis) as reader:
        assert reader is not None
        return reader.depths([queue])[queue]
