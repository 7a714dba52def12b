"""The worker's consumer: a message it cannot read costs a dead letter, never the worker.

Celery's consumer takes an error while it reads a task message for an unrecoverable one:
a body of ``{}`` or ``null``, a content type such as ``application/data``, made the
worker's main process exit, and the message went back to its queue for the next worker
to die of. This consumer checks each message first (``message_checks.py``); one that
fails is acknowledged, recorded as a ``malformed`` dead letter (queue, content type,
size: never the body) and logged in one line. The same happens to a message that still
fails inside Celery (a safety net), to one kombu cannot decode (compressed bodies are
refused: ``compressed_bodies.py``), and to one the transport cannot even parse
(``transport_guard.py``). Connection errors propagate: they make the consumer reconnect,
and a message whose dead letter could not be written goes back to its queue.

Rejected: a task ``Strategy`` of our own (Celery's hook per task name). It runs only for
messages that name a registered task, after kombu has decoded them; a message with no
task header, or that kombu cannot decode, never reaches it. Rejected too: overriding only
``on_decode_error``, which sees decoding errors but not a decoded body of the wrong shape.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import redis
from celery.worker.consumer import Consumer
from vine import promise

from dagwright.app import DagwrightCelery
from dagwright.dlq import RawMessage
from dagwright.orchestrator.control.dead_letter_replay import dead_letters
from dagwright.tasks.compressed_bodies import refuse_compressed_bodies
from dagwright.tasks.env import execution_env
from dagwright.tasks.message_checks import DeliveredMessage, malformation
from dagwright.tasks.transport_guard import guard_transport_reads

log = logging.getLogger(__name__)

# An outage of the state store while a dead letter is written: the message is not
# acknowledged, so that it comes back once the store does (kombu counts these errors as
# connection errors, so the consumer reconnects).
STORE_DOWN = (redis.ConnectionError, redis.TimeoutError)


# Celery's native delayed delivery (declared where the queues are quorum queues, on
# RabbitMQ) serves messages with an eta or a countdown; dagwright sends none (a run's
# countdowns and retry waits live in the run state), so its 28 levels of queues are not
# declared at every worker start.
DELAYED_DELIVERY_STEP = "celery.worker.consumer.delayed_delivery:DelayedDelivery"


class GuardedConsumer(Consumer):
    """Celery's consumer, with every way a message can fail to be read ending in a dead
    letter. Set as the app's ``worker_consumer`` by ``build_app``."""

    class Blueprint(Consumer.Blueprint):
        default_steps = [
            step for step in Consumer.Blueprint.default_steps if step != DELAYED_DELIVERY_STEP
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        refuse_compressed_bodies()
        super().__init__(*args, **kwargs)

    def connection_for_read(self, heartbeat: float | None = None) -> Any:
        connection = self.app.connection_for_read(heartbeat=heartbeat)
        guard_transport_reads(connection, self.drop_unreadable)
        return self.ensure_connected(connection)

    def create_task_handler(self, promise: Any = promise) -> Any:
        read_by_celery = super().create_task_handler(promise)

        def on_task_received(message: Any) -> Any:
            reason = malformation(self.delivered(message))
            if reason is not None:
                return self.drop_malformed(message, reason)
            try:
                return read_by_celery(message)
            except self.connection_errors:
                raise
            except Exception as exc:
                return self.drop_malformed(message, f"Celery could not read it ({exc_name(exc)})")

        return on_task_received

    # Celery's own handlers of unreadable messages log the body, and a decoding error at
    # CRITICAL: each becomes a dead letter instead.

    def on_decode_error(self, message: Any, exc: BaseException) -> None:
        headers = message.headers if isinstance(message.headers, dict) else {}
        if headers.get("compression"):
            reason = "its body is compressed: dagwright sends none, so it is not inflated"
        else:
            reason = f"its body cannot be decoded ({exc_name(exc)})"
        self.drop_malformed(message, reason)

    def on_unknown_message(self, body: Any, message: Any) -> None:
        self.drop_malformed(message, "it is not a task message")

    def on_unknown_task(self, body: Any, message: Any, exc: BaseException) -> None:
        self.drop_malformed(message, "it names no task this worker runs")

    def on_invalid_task(self, body: Any, message: Any, exc: BaseException) -> None:
        self.drop_malformed(message, f"Celery refused it ({exc_name(exc)})")

    # -- dropping -------------------------------------------------------------------

    def delivered(self, message: Any) -> DeliveredMessage:
        return DeliveredMessage(
            queue=self.queue_of(message),
            headers=message.headers,
            content_type=message.content_type,
            content_encoding=message.content_encoding,
            body=message.body,
        )

    def queue_of(self, message: Any) -> str:
        """The queue the message names, if it is one this worker consumes ('' if not:
        the name comes from the message, so a hostile one could say anything)."""
        info = message.delivery_info if isinstance(message.delivery_info, dict) else {}
        routing_key = info.get("routing_key")
        consumed = self.app.amqp.queues.consume_from or {}
        return routing_key if isinstance(routing_key, str) and routing_key in consumed else ""

    def drop_malformed(self, message: Any, reason: str) -> None:
        """Record the message as a dead letter, then acknowledge it (in that order: if
        the record cannot be written, the message comes back to be recorded later)."""
        self.record(self.delivered(message).raw(), reason)
        if not message.acknowledged:
            message.ack_log_error(log, self.connection_errors)

    def drop_unreadable(self, exc: Exception) -> None:
        """A message the transport could not parse; it has left its queue already."""
        unknown = RawMessage(queue="", content_type="", content_encoding="", body_bytes=-1)
        self.record(unknown, f"the broker transport could not read it ({exc_name(exc)})")

    def record(self, raw: RawMessage, reason: str) -> None:
        runtime = execution_env(cast(DagwrightCelery, self.app)).runtime
        try:
            entry_id = dead_letters(runtime).add_malformed(raw, reason)
        except STORE_DOWN:
            raise
        except Exception as exc:  # never die of a message, not even of its dead letter
            entry_id = f"not recorded ({exc_name(exc)})"
        log.error(
            "dropped a malformed message (queue %s, content type %s, encoding %s, %s bytes): "
            "%s; dead letter %s",
            raw.queue or "unknown",
            raw.content_type or "-",
            raw.content_encoding or "-",
            raw.body_bytes if raw.body_bytes >= 0 else "?",
            reason,
            entry_id,
        )


def exc_name(exc: BaseException) -> str:
    """An error's class only: its message may quote the body."""
    return type(exc).__name__
