"""The stop listener hears every stop announced once it has started."""

from __future__ import annotations

import threading
from collections.abc import Callable

import redis

from dagwright.keys import Keys
from dagwright.orchestrator.stop_signals import StopListener, announce_stop


def hearing(heard: threading.Event) -> Callable[[str], None]:
    def on_stop(run_id: str) -> None:
        if run_id == "r":
            heard.set()

    return on_stop


def test_a_stop_announced_right_after_start_is_heard(redis_client: redis.Redis) -> None:
    keys = Keys()
    for _ in range(20):  # a subscription still on its way would miss some of these
        heard = threading.Event()
        listener = StopListener(redis_client, keys.stop_channel, hearing(heard)).start()
        try:
            announce_stop(redis_client, keys, "r")
            assert heard.wait(5)
        finally:
            listener.close()
