"""Pages of the run index, filtered by status and goal text: what ``GET /api/v1/runs``
and the dashboard's runs list read.

The index is a sorted set by creation time, so a page is a range of it, and the cursor
says where the last page stopped (``"<creation ms>:<run id>"``): new runs arriving
between two pages shift nothing. Filters are applied to run summaries (one HGETALL each,
no nodes), at most ``MAX_SCANNED`` per page: a filter that matches nothing in a large
index returns an empty page with a cursor to go on from, rather than reading it all.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from dagwright.errors import InputError
from dagwright.models import RunState, RunStatus
from dagwright.orchestrator.runstate.store import RunStore

MAX_SCANNED = 2000  # run summaries read for one page, at most
BATCH = 200
MAX_LIMIT = 500


@dataclass(frozen=True)
class RunFilter:
    """Which runs a page holds: of a ``status`` (None: any), whose goal or id contains
    ``text`` (case-insensitive; "" any)."""

    status: RunStatus | None = None
    text: str = ""

    def matches(self, state: RunState) -> bool:
        if self.status is not None and state.status != self.status:
            return False
        needle = self.text.lower()
        return not needle or needle in state.goal.lower() or needle in state.run_id.lower()


@dataclass(frozen=True)
class RunPage:
    """Run summaries (no nodes), newest first, and the cursor of the next page (None at
    the end of the index)."""

    runs: list[RunState]
    next_cursor: str | None


def parse_status(status: RunStatus | str | None) -> RunStatus | None:
    """The run status named ``status``, or InputError listing those there are."""
    if status is None or status == "":
        return None
    try:
        return RunStatus(status)
    except ValueError:
        names = ", ".join(s.value for s in RunStatus)
        raise InputError(f"unknown run status {status!r}: the statuses are {names}") from None


def parse_cursor(cursor: str | None) -> tuple[float | str, str | None]:
    """Where a page starts: (the highest creation ms, the run id it must come after)."""
    if not cursor:
        return "+inf", None
    ms, _, run_id = cursor.partition(":")
    try:
        max_ms = float(ms)
    except ValueError:
        max_ms = math.nan
    if not math.isfinite(max_ms):  # "nan" and "inf" parse, and no page starts there
        raise InputError(
            f"invalid cursor {cursor[:40]!r}: pass next_cursor of the last page as it was"
        )
    return max_ms, run_id


def find_runs(store: RunStore, where: RunFilter, limit: int, cursor: str | None) -> RunPage:
    """One page of at most ``limit`` runs matching ``where``, from ``cursor`` on."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InputError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
    found: list[RunState] = []
    last: tuple[str, float] | None = None
    for run_id, created_ms in _index_from(store, cursor):
        last = (run_id, created_ms)
        if not store.exists(run_id):
            continue
        state = store.read_state(run_id, include_nodes=False)
        if where.matches(state):
            found.append(state)
            if len(found) == limit:
                break
    return RunPage(found, _cursor_after(store, last))


def _index_from(store: RunStore, cursor: str | None) -> Iterator[tuple[str, float]]:
    """The index from ``cursor`` on, newest first, up to MAX_SCANNED entries."""
    max_ms, after_id = parse_cursor(cursor)
    scanned = 0
    while scanned < MAX_SCANNED:
        batch = store.run_index_page(max_ms, BATCH + 1)
        fresh = [(rid, ms) for rid, ms in batch if not _at_or_before(rid, ms, max_ms, after_id)]
        yield from fresh[: MAX_SCANNED - scanned]
        scanned += len(fresh)
        if len(batch) <= BATCH or not fresh:
            return
        max_ms, after_id = fresh[-1][1], fresh[-1][0]


def _at_or_before(run_id: str, ms: float, max_ms: float | str, after_id: str | None) -> bool:
    """Whether an entry was on an earlier page: same creation ms as the cursor, and an id
    the index orders before it (a reverse range lists equal scores by id, descending)."""
    return after_id is not None and ms == max_ms and run_id >= after_id


def _cursor_after(store: RunStore, last: tuple[str, float] | None) -> str | None:
    """The cursor after ``last`` if the index holds anything older, else None."""
    if last is None:
        return None
    run_id, ms = last
    older = store.run_index_page(ms, BATCH)
    if not any(not _at_or_before(rid, t, ms, run_id) for rid, t in older):
        return None
    return f"{ms:.0f}:{run_id}"
