"""How many event streams may be open, and what they read Redis with.

An open event stream (SSE) reads its run's events a bounded wait at a time, for as long
as the run lasts. Each read holds a Redis connection and a thread while it blocks. Issue
30: the streams read over the pool every request uses (redis-py's, 100 connections) and
the server allowed 200 of them, so from about 100 open streams every other call, whoami
included, found the pool empty and answered 503. Three bounds close that:

- at most ``server_max_event_streams`` open at once, and at most
  ``server_max_event_streams_per_token`` for one token (its dashboard sessions count as
  the token): one more is refused at once, with ``Retry-After``, never queued;
- the streams read over a connection pool of their own, of exactly that many
  connections (a stream makes one read at a time), so they cannot take one of the
  connections the rest of the API needs, and never find their own pool empty;
- and in threads of their own (``CapacityLimiter``), apart from the pool every other
  call runs in.

The counts live in this process: ``dagwright server`` is one process (uvicorn, one
worker). Rejected: waiting for a slot (a queued stream holds its connection to the
server and shows the browser nothing; a 503/429 tells it to come back).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dagwright.connection import connect
from dagwright.orchestrator.runstate.store import RunStore
from dagwright.server.problems import Problem

if TYPE_CHECKING:
    from anyio import CapacityLimiter

    from dagwright.client import Client

RETRY_AFTER_S = 10
"""What a refused stream is told to wait before it asks again."""


@dataclass
class StreamSlots:
    """The open streams, counted in total and by holder (a token's id)."""

    total: int
    per_holder: int
    open_total: int = 0
    open_by_holder: Counter[str] = field(default_factory=Counter)

    def take(self, holder: str) -> None:
        """Count one more stream of ``holder``, or refuse it (429: the holder has its
        share open; 503: the server has all of its streams open)."""
        if self.open_by_holder[holder] >= self.per_holder:
            raise refused(
                429,
                f"this token has {self.per_holder} event streams open, its limit "
                "(DAGWRIGHT_SERVER_MAX_EVENT_STREAMS_PER_TOKEN): close one, or retry later",
            )
        if self.open_total >= self.total:
            raise refused(
                503,
                f"the server has {self.total} event streams open, its limit "
                "(DAGWRIGHT_SERVER_MAX_EVENT_STREAMS): retry later",
            )
        self.open_total += 1
        self.open_by_holder[holder] += 1

    def give_back(self, holder: str) -> None:
        self.open_total -= 1
        self.open_by_holder[holder] -= 1
        if self.open_by_holder[holder] <= 0:
            del self.open_by_holder[holder]


def refused(status: int, detail: str) -> Problem:
    return Problem(
        status, detail, error="TooManyEventStreams", headers={"Retry-After": str(RETRY_AFTER_S)}
    )


@dataclass(frozen=True)
class EventStreams:
    """Everything the open streams share: their count, their threads, their Redis pool."""

    slots: StreamSlots
    reads: CapacityLimiter
    store: RunStore

    @classmethod
    def for_client(cls, client: Client) -> EventStreams:
        """Made on first use, in the event loop (a limiter belongs to the running loop)."""
        from anyio import CapacityLimiter

        settings = client.settings
        total = settings.server.max_event_streams
        redis = connect(client.redis_url, settings.redis, max_connections=total)
        return cls(
            slots=StreamSlots(total, settings.server.max_event_streams_per_token),
            reads=CapacityLimiter(total),
            store=RunStore(
                redis, client.runtime.keys, events_maxlen=settings.retention.events_maxlen
            ),
        )
