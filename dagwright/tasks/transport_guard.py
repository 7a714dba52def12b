"""The consumer's Redis channel, hardened against two ways kombu's own code ends a worker.

1. A message the transport itself cannot read. kombu's Redis transport pops a message
   off its list (BRPOP) and parses it before any callback of the consumer runs: an item
   that is not JSON, or JSON that is not kombu's envelope (``5``, headers that are a
   list...), raises in the worker's main process, which Celery takes for an
   unrecoverable error. The item has already left the list, so nothing is lost by
   dropping it; the guard does so and tells the consumer, which records it.
2. A channel used after its connection was closed. After a Redis outage Celery closes
   the broken connection (kombu then forgets the connection's settings: its transport's
   ``client`` is None) and opens a new one; but a task that was running meanwhile is
   acknowledged, when it ends, on the channel its message came from. That channel's pool
   is gone, so kombu builds a new one from the forgotten settings and raises
   ``AttributeError: 'NoneType' object has no attribute 'hostname'``, which Celery also
   takes for unrecoverable. The guard raises a connection error instead, which Celery
   logs and lives with (the message stays unacknowledged in Redis: kombu restores it
   after the visibility timeout, and its fence drops it).

The guard is a subclass of the connection's own channel class, set on that connection's
transport only. Connection errors still propagate: they are what makes the consumer
reconnect.

On RabbitMQ neither happens: py-amqp parses a frame before kombu sees a message (a body
is bytes, its headers a table), and a channel of a closed connection raises a connection
error of its own; the guard leaves that transport alone.

Rejected: a transport class of our own in ``broker_transport``. kombu ignores it for
``redis+socket://`` URLs, and it would replace the Sentinel transport as well.
"""

from __future__ import annotations

from collections.abc import Callable
from queue import Empty
from typing import Any

import redis

READ_METHOD = "_brpop_read"  # kombu.transport.redis.Channel: pops and delivers one message
SETTINGS_METHOD = "_connparams"  # kombu.transport.redis.Channel: a new pool's settings


class ClosedConnectionError(redis.ConnectionError):
    """A channel of a closed broker connection was asked for a new Redis connection."""


def guard_transport_reads(connection: Any, on_unreadable: Callable[[Exception], None]) -> None:
    """Make the channels ``connection`` creates from now on drop a message they cannot
    read (calling ``on_unreadable`` with the error) and raise a connection error once
    the connection is closed. A transport that is not kombu's Redis transport is left
    alone (its internals are not known here)."""
    transport = connection.transport
    channel_class = getattr(transport, "Channel", None)  # py-amqp's transport has none
    if channel_class is None or not hasattr(channel_class, READ_METHOD):
        return
    if getattr(channel_class, "guarded", False):
        return
    transport.Channel = guarded_channel_class(channel_class, on_unreadable)


def guarded_channel_class(base: type, on_unreadable: Callable[[Exception], None]) -> type:
    read = getattr(base, READ_METHOD)
    settings_of = getattr(base, SETTINGS_METHOD)

    def read_one(self: Any, **options: Any) -> Any:
        try:
            return read(self, **options)
        except (Empty, *self.connection_errors):
            raise
        except Exception as exc:
            on_unreadable(exc)
            return True  # one message was taken (and dropped): the poller moves on

    def settings_while_open(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.connection.client is None:
            raise ClosedConnectionError("this broker connection was closed (since replaced)")
        return settings_of(self, *args, **kwargs)

    overrides = {READ_METHOD: read_one, SETTINGS_METHOD: settings_while_open, "guarded": True}
    return type(f"Guarded{base.__name__}", (base,), overrides)
