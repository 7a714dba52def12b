"""Telling workers at once that a run was stopped (cancelled, or past its run timeout).

The run's state already says so the moment it is stopped, and every worker would learn it
at its next lease renewal (``heartbeat_interval_s``). This makes it about a round trip
instead: the stopper publishes the run id on ``keys.stop_channel``, and one listener
thread per worker process sets the stop events of that run's nodes it runs. A message
missed (a listener reconnecting) costs only that speed: the renewal is the backstop.

Pub/sub ignores the database number: deployments sharing a server (and a ``key_prefix``)
hear each other's stops, which costs a comparison, since run ids are unique.

Rejected: one channel per run (a subscribe and unsubscribe per node claimed, for no gain:
a worker process runs few nodes at once, and run ids are cheap to compare); keyspace
notifications on the run hash (a server setting many deployments leave off).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import redis

from dagwright.keys import Keys

log = logging.getLogger(__name__)

RESUBSCRIBE_DELAY_S = 1.0  # after the connection broke, before subscribing again
# How long ``start`` waits for the subscription: a stop announced right after a worker
# process starts its first node must not be missed (the renewal would be the backstop).
SUBSCRIBE_WAIT_S = 5.0
POLL_S = 1.0  # longest wait for a message before checking whether to close


# An announcement naming only some nodes of a run (a run left open for its teardown):
# "<run id>\t<node>\t<node>...". A worker of an older version, which reads it as a run id
# matching none, learns the stop at its next renewal instead.
NODES_SEPARATOR = "\t"


def announce_stop(
    client: redis.Redis, keys: Keys, run_id: str, nodes: list[str] | None = None
) -> None:
    """Tell every listening worker that ``run_id`` was stopped (only ``nodes`` of it, if
    given). Never raises: the stop is recorded already, and lease renewals tell the
    workers anyway."""
    message = NODES_SEPARATOR.join([run_id, *nodes]) if nodes is not None else run_id
    try:
        client.publish(keys.stop_channel, message)
    except redis.RedisError:
        log.warning("announcing the stop of run %s failed; workers learn it at renewal", run_id)


def stopped_nodes(message: str) -> tuple[str, frozenset[str] | None]:
    """An announcement's run id, and the nodes it names (None: all of the run's)."""
    run_id, *nodes = message.split(NODES_SEPARATOR)
    return run_id, frozenset(nodes) if nodes else None


class StopListener:
    """A daemon thread that calls ``on_stop(run_id)`` for each stop announced, until
    :meth:`close`. It subscribes again after the connection breaks."""

    def __init__(self, client: redis.Redis, channel: str, on_stop: Callable[[str], None]) -> None:
        self._client = client
        self._channel = channel
        self._on_stop = on_stop
        self._closed = threading.Event()
        self._subscribed = threading.Event()
        self._thread = threading.Thread(
            target=self._listen_forever, name="dagwright-stop-listener", daemon=True
        )

    def start(self) -> StopListener:
        """Start listening; return once subscribed (or after ``SUBSCRIBE_WAIT_S``, if the
        server does not answer: the thread goes on trying)."""
        self._thread.start()
        self._subscribed.wait(SUBSCRIBE_WAIT_S)
        return self

    def close(self) -> None:
        self._closed.set()

    def _listen_forever(self) -> None:
        while not self._closed.is_set():
            try:
                self._listen()
            except Exception:
                if self._closed.is_set():  # closing: its server may be gone first
                    return
                log.warning(
                    "the stop listener lost its connection; subscribing again", exc_info=True
                )
                self._closed.wait(RESUBSCRIBE_DELAY_S)

    def _listen(self) -> None:
        pubsub = self._client.pubsub()
        try:
            pubsub.subscribe(self._channel)
            self._confirm(pubsub)
            while not self._closed.is_set():
                message = pubsub.get_message(timeout=POLL_S)
                if message is not None and message["type"] == "message":
                    self._on_stop(_text(message["data"]))
        finally:
            pubsub.close()

    def _confirm(self, pubsub: redis.client.PubSub) -> None:
        """Wait for the server's confirmation of the subscription (from then on, every
        stop announced reaches this listener), then let ``start`` return."""
        deadline = time.monotonic() + SUBSCRIBE_WAIT_S
        while time.monotonic() < deadline:
            message = pubsub.get_message(timeout=0.1)
            if message is not None and message["type"] == "subscribe":
                break
        self._subscribed.set()


def _text(data: bytes | str) -> str:
    return data.decode() if isinstance(data, bytes) else data
