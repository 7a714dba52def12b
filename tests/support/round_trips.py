"""Counting the Redis round trips a piece of code makes, on the real connections."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis

ARRAY_HEADER = re.compile(rb"\*\d+")


@contextmanager
def counting_round_trips(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The commands this thread sends to Redis meanwhile, one entry per round trip."""
    sent: list[str] = []
    original = redis.connection.AbstractConnection.send_packed_command
    counted_thread = threading.get_ident()

    def send_packed_command(self: Any, command: Any, check_health: bool = True) -> None:
        if threading.get_ident() == counted_thread:
            sent.append(describe(command))
        original(self, command, check_health)

    with monkeypatch.context() as patch:
        patch.setattr(
            redis.connection.AbstractConnection, "send_packed_command", send_packed_command
        )
        yield sent


def describe(command: Any) -> str:
    """The names of the commands one round trip sends (``EVALSHA``, ``LPUSH+ZREM``...)."""
    parts = command if isinstance(command, list) else [command]
    lines = b"".join(bytes(part) for part in parts).split(b"\r\n")
    names = [
        lines[i + 2].decode(errors="replace")
        for i, line in enumerate(lines[:-2])
        if ARRAY_HEADER.fullmatch(line) and lines[i + 1].startswith(b"$")
    ]
    return "+".join(names)
