"""``client.dlq``: the dead-letter queue, read, replayed and purged."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

from dagwright.client.redis_errors import SubClient
from dagwright.dlq import (
    Classification,
    DeadLetter,
    DeadLetterFilter,
    DeadLetterStats,
    DeadLetterStatus,
)
from dagwright.errors import InputError, NotReplayableError, UnknownDeadLetterError
from dagwright.orchestrator.control.dead_letter_replay import (
    ReplayResult,
    dead_letters,
    replay,
    replay_matching,
)
from dagwright.shown_ids import shown_id

if TYPE_CHECKING:
    pass


class DeadLetterClient(SubClient):
    """Nodes that failed for good, and what to do about them (``client.dlq``)."""

    def list(
        self,
        *,
        run_id: str | None = None,
        worker_type: str | None = None,
        classification: Classification | str | None = None,
        status: DeadLetterStatus | str | None = None,
        limit: int = 50,
    ) -> builtins.list[DeadLetter]:
        """Dead letters, newest first, filtered by any of run, worker type,
        classification (transient/permanent/budget/policy/timeout/poison/malformed)
        and status."""
        where = dlq_filter(run_id, worker_type, classification, status)
        return dead_letters(self._client.runtime).find(where, limit=limit)

    def get(self, entry_id: str) -> DeadLetter:
        """One dead letter (DeadLetterError if there is none)."""
        return dead_letters(self._client.runtime).get(entry_id)

    def replay(self, entry_id: str, *, fresh: bool = False) -> ReplayResult:
        """Run a dead letter's node again, re-opening its run: completed nodes are kept,
        and an agent resumes from its checkpoint unless ``fresh``. NotReplayableError if it
        cannot be replayed (replayed already, superseded, its run cancelled or expired)."""
        runtime = self._client.runtime
        letter = dead_letters(runtime).get(entry_id)
        result = replay(runtime, self._client.broker, letter, fresh=fresh)
        if not result.replayed:
            raise NotReplayableError(f"cannot replay dead letter {entry_id}: {result.reason}")
        return result

    def replay_all(
        self,
        *,
        run_id: str | None = None,
        worker_type: str | None = None,
        classification: Classification | str | None = None,
        fresh: bool = False,
    ) -> builtins.list[ReplayResult]:
        """Replay every pending dead letter that matches (all of them, unfiltered)."""
        where = dlq_filter(run_id, worker_type, classification, None)
        return replay_matching(self._client.runtime, self._client.broker, where, fresh=fresh)

    def purge(self, entry_id: str) -> None:
        """Delete a dead letter (DeadLetterError if there is none)."""
        if not dead_letters(self._client.runtime).purge(entry_id):
            raise UnknownDeadLetterError(f"no dead letter {shown_id(entry_id)!r}")

    def purge_all(
        self,
        *,
        run_id: str | None = None,
        worker_type: str | None = None,
        classification: Classification | str | None = None,
        status: DeadLetterStatus | str | None = None,
    ) -> int:
        """Delete every dead letter that matches; how many were deleted."""
        store = dead_letters(self._client.runtime)
        where = dlq_filter(run_id, worker_type, classification, status)
        return sum(store.purge(letter.id) for letter in builtins.list(store.scan(where)))

    def stats(self) -> DeadLetterStats:
        return dead_letters(self._client.runtime).stats()


def dlq_filter(
    run_id: str | None,
    worker_type: str | None,
    classification: Classification | str | None,
    status: DeadLetterStatus | str | None,
) -> DeadLetterFilter:
    """A filter from loose arguments; InputError naming the accepted values if one is off."""
    try:
        return DeadLetterFilter(
            run_id=run_id,
            worker_type=worker_type,
            classification=Classification(classification) if classification else None,
            status=DeadLetterStatus(status) if status else None,
        )
    except ValueError:
        classes = ", ".join(Classification)
        statuses = ", ".join(DeadLetterStatus)
        raise InputError(
            f"unknown classification {classification!r} or status {status!r}: "
            f"classifications are {classes}; statuses are {statuses}"
        ) from None
