"""Reading and purging the DLQ stream (a node's entries are written by the run state
machine's fail step, replayed by ``orchestrator.replay``; a malformed message's are added
here by the worker that dropped it).

Each entry's fate (replayed, purged) is a key of its own, set once by the step that
decides it and expiring with the DLQ's retention, so the stream itself is append-only.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from itertools import islice

import redis

from dagwright.dlq.entries import (
    Classification,
    DeadLetter,
    DeadLetterFilter,
    DeadLetterStats,
    DeadLetterStatus,
    RawMessage,
)
from dagwright.errors import UnknownDeadLetterError
from dagwright.keys import QUEUE_PREFIX, Keys
from dagwright.shown_ids import shown_id

PAGE = 200  # entries read per round trip when scanning
MALFORMED_ERROR_CLASS = "MalformedMessage"


class DeadLetterStore:
    def __init__(self, client: redis.Redis, keys: Keys, *, retention_s: int) -> None:
        self.client = client
        self.keys = keys
        self.retention_s = retention_s

    def add_malformed(self, raw: RawMessage, reason: str) -> str:
        """Record a message a worker dropped unread; returns the entry's id. It has the
        fields of a node's entry (empty where there is no run or node), so that every
        reader of the stream (list, stats, filters, metrics) takes it as it is."""
        now_ms = int(time.time() * 1000)
        fields = {
            "run": "",
            "node": "",
            "fence": "0",
            "worker_type": raw.queue.removeprefix(QUEUE_PREFIX),
            "spec": "{}",
            "attempts": "1",
            "classification": Classification.MALFORMED.value,
            "error_class": MALFORMED_ERROR_CLASS,
            "message": reason,
            "first_failure_ms": str(now_ms),
            "last_failure_ms": str(now_ms),
            **raw.to_stream(),
        }
        entry_id = self.client.xadd(
            self.keys.dlq,
            fields,
            minid=now_ms - self.retention_s * 1000,
            approximate=True,
        )
        return str(entry_id)

    def find(self, where: DeadLetterFilter | None = None, *, limit: int = 50) -> list[DeadLetter]:
        """Matching dead letters, newest first (at most ``limit``; 0: all)."""
        return list(islice(self.scan(where or DeadLetterFilter()), limit or None))

    def scan(self, where: DeadLetterFilter) -> Iterator[DeadLetter]:
        """Every matching dead letter, newest first, a page at a time."""
        end = "+"
        while True:
            page = self.client.xrevrange(self.keys.dlq, max=end, min="-", count=PAGE)
            matching = [(entry_id, fields) for entry_id, fields in page if where.matches(fields)]
            statuses = self._statuses(matching)
            for (entry_id, fields), status in zip(matching, statuses, strict=True):
                letter = DeadLetter.from_stream(entry_id, fields, status)
                if where.status is None or letter.status == where.status:
                    yield letter
            if len(page) < PAGE:
                return
            end = "(" + page[-1][0]

    def get(self, entry_id: str) -> DeadLetter:
        """The dead letter ``entry_id``; DeadLetterError if there is none."""
        try:
            entries = self.client.xrange(self.keys.dlq, min=entry_id, max=entry_id, count=1)
        except redis.ResponseError:  # not a stream id at all
            entries = []
        if not entries:
            raise UnknownDeadLetterError(
                f"no dead letter {shown_id(entry_id)!r}: `dagwright dlq list` shows them "
                "(purged ones and those past DAGWRIGHT_DLQ_RETENTION_S are gone)"
            )
        [(found_id, fields)] = entries
        return DeadLetter.from_stream(found_id, fields, self._statuses([(found_id, fields)])[0])

    def purge(self, entry_id: str) -> bool:
        """Delete a dead letter; False if there was none. A replayed one keeps saying so
        (its status outlives it), a pending one can no longer be replayed. The status is
        set before the entry goes, so that a replay racing the purge finds it (the status
        is in the run's Cluster slot, the stream and ``dlq_settled`` in their own: separate
        steps, in that order)."""
        try:
            entries = self.client.xrange(self.keys.dlq, min=entry_id, max=entry_id, count=1)
        except redis.ResponseError:  # not a stream id at all
            return False
        if not entries:
            return False
        [(found_id, fields)] = entries
        status_key = self.keys.dlq_status(fields.get("run", ""), found_id)
        self.client.set(status_key, DeadLetterStatus.PURGED, nx=True, ex=self.retention_s)
        deleted = self.client.xdel(self.keys.dlq, found_id)
        self.client.zrem(self.keys.dlq_settled, found_id)
        return bool(deleted)

    def depth(self) -> int:
        """Dead letters waiting for a replay or a purge, in three commands whatever the
        DLQ holds: the stream's length less its entries replayed (``keys.dlq_settled``,
        from the stream's oldest entry on: those trimmed with it are not in the length).
        A purge takes its entry out of both."""
        pipe = self.client.pipeline(transaction=False)
        pipe.xlen(self.keys.dlq)
        pipe.xrange(self.keys.dlq, min="-", max="+", count=1)
        length, oldest = pipe.execute()
        if not oldest:
            return 0
        oldest_id = oldest[0][0]
        oldest_ms = int(
            (oldest_id.decode() if isinstance(oldest_id, bytes) else oldest_id).split("-")[0]
        )
        replayed = self.client.zcount(self.keys.dlq_settled, oldest_ms, "+inf")
        return max(0, int(length) - int(replayed))

    def stats(self) -> DeadLetterStats:
        by_status: Counter[str] = Counter()
        by_class: Counter[str] = Counter()
        by_type: Counter[str] = Counter()
        oldest = newest = None
        for letter in self.scan(DeadLetterFilter()):
            by_status[letter.status] += 1
            by_class[letter.classification] += 1
            by_type[letter.worker_type] += 1
            newest = newest or letter.last_failure_at
            oldest = letter.last_failure_at
        return DeadLetterStats(
            total=sum(by_status.values()),
            by_status=dict(by_status),
            by_classification=dict(by_class),
            by_worker_type=dict(by_type),
            oldest_at=oldest,
            newest_at=newest,
        )

    def _statuses(self, entries: list[tuple[str, dict[str, str]]]) -> list[str | None]:
        """The status of each (entry id, fields): one round trip, a GET each (each in
        its run's Cluster slot, so no MGET)."""
        if not entries:
            return []
        pipe = self.client.pipeline(transaction=False)
        for entry_id, fields in entries:
            pipe.get(self.keys.dlq_status(fields.get("run", ""), entry_id))
        return list(pipe.execute())
