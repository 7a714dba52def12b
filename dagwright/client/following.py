"""Following a run's events in bounded steps: when they have all been read.

A final event (``run.succeeded``...) ends a run's events only when nothing follows it: a
dead letter's replay re-opens an ended run (``run.reopened``) and its events go on after
the old end. So once the run looks ended, one read without blocking says whether it is.
``Client.events`` iterates over this (and ``AsyncClient.events`` follows its
``FollowCursor``); the HTTP API's event stream steps it from a thread,
a bounded wait at a time, so it can send keep-alives and notice a client that left.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagwright.client.handle import FINAL_RUN_EVENTS
from dagwright.connection import translate_redis_errors
from dagwright.models import Event

if TYPE_CHECKING:
    from dagwright.client.runs import Client
    from dagwright.orchestrator.runstate.store import RunStore


class FollowCursor:
    """Where a follower of one run's events stands, and what its next read must be: the
    rule both the sync EventFollower and the asyncio client's events follow, without I/O.

    Each step: read with ``block_ms(wait_s)``, give the batch to ``took``; if it returns
    True, read the run's status and give ``saw_final`` whether it is final."""

    def __init__(self, after: str = "0") -> None:
        self.cursor = after
        self.ended = False  # the last event read ended the run, or the run is final
        self.finished = False

    def block_ms(self, wait_s: float | None) -> int | None:
        """How long the next read may block: not at all once the run looks ended (one
        read without blocking settles whether it is)."""
        return max(1, int(wait_s * 1000)) if wait_s is not None and not self.ended else None

    def took(self, batch: list[Event]) -> bool:
        """Move past ``batch``; True when the run's status must be read next (nothing came
        and the run did not look ended: if it has ended since, the next step takes its end)."""
        if batch:
            self.cursor, self.ended = batch[-1].id, batch[-1].kind in FINAL_RUN_EVENTS
        elif self.ended:
            self.finished = True
        else:
            return True
        return False

    def saw_final(self, is_final: bool) -> None:
        self.ended = is_final


class EventFollower:
    """A cursor on one run's events: ``step(wait_s)`` returns the next batch (waiting up to
    ``wait_s`` for one), and ``finished`` turns true once the run has ended and every
    event up to its end was returned."""

    def __init__(
        self, client: Client, run_id: str, *, after: str = "0", store: RunStore | None = None
    ) -> None:
        """``store``: what to read with, if not the client's own (the HTTP API's event
        streams read over a connection pool of their own: server/stream_slots.py)."""
        self.client = client
        self.run_id = run_id
        self.position = FollowCursor(after)
        self.store = store or client.runtime.store

    @property
    def cursor(self) -> str:
        return self.position.cursor

    @property
    def finished(self) -> bool:
        return self.position.finished

    def step(self, wait_s: float | None) -> list[Event]:
        """The events after the cursor; waits up to ``wait_s`` (None: not at all) unless
        the run looks ended, when one read without blocking settles it."""
        batch = self._read(self.position.block_ms(wait_s))
        if self.position.took(batch):
            self.position.saw_final(self._run_is_final())
        return batch

    def _read(self, block_ms: int | None) -> list[Event]:
        with translate_redis_errors(self.client.redis_url):
            return self.store.read_events(
                self.run_id, after=self.position.cursor, block_ms=block_ms
            )

    def _run_is_final(self) -> bool:
        with translate_redis_errors(self.client.redis_url):
            return self.store.run_status(self.run_id).is_final
