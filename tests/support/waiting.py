"""Waiting on conditions with a deadline (never a fixed sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import redis

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T], *, timeout: float = 30.0, interval: float = 0.05, what: str = ""
) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


def server_time_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def wait_for_server_clock_tick(client: redis.Redis) -> None:
    """Until the Redis server's millisecond clock has moved on: what the server stamps
    from now on is strictly later than what it stamped so far."""
    start = server_time_ms(client)
    wait_until(lambda: server_time_ms(client) > start, timeout=5, interval=0.001, what="a tick")
