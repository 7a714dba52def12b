"""Evals: list them, read one (cases by scorers and their statistics), compare two.

Read only: an eval is run by ``dagwright eval`` (it submits ordinary runs, which
``/runs`` shows), and these routes read what it stored (``evals/store.py``). One eval's
shape is ``dagwright evals show --json``'s (``evals/reports.report_json``); a list's rows
and a comparison add to the CLI's (``evals/json_views.py``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from dagwright.errors import UnknownEvalError
from dagwright.evals.baselines import compare
from dagwright.evals.json_views import comparison_json, eval_summary_json
from dagwright.evals.reports import report_json
from dagwright.evals.runner import eval_store
from dagwright.evals.store import EvalStore
from dagwright.evals.suite import NAME_PATTERN
from dagwright.server.auth import READ, client_of
from dagwright.server.blocking import in_thread
from dagwright.server.openapi import documented
from dagwright.server.resources import Eval, EvalComparison, EvalSummary

if TYPE_CHECKING:
    from dagwright.evals.results import EvalRecord

router = APIRouter(tags=["evals"])

# A list row carries each eval's pass rate and cost, read from all its results: the list
# is kept short rather than the rows thin, and the rows of evals that ended are kept.
MAX_LISTED_EVALS = 100
MAX_KEPT_ROWS = 2000


class EndedEvalRows:
    """The list rows of evals that no longer run, kept by this server process.

    A row is read from every result of its eval (twenty evals of a thousand case runs:
    seconds); an eval that ended gets no more results, so its row is kept, by its id and
    its end (an interrupted eval that is resumed runs again, then ends anew). A running
    eval's row is read each time."""

    def __init__(self, size: int = MAX_KEPT_ROWS) -> None:
        self.size = size
        self._rows: OrderedDict[tuple[str, str, str], dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def row(self, store: EvalStore, record: EvalRecord) -> dict[str, Any]:
        kept = self._kept(ended_key(record))
        if kept is not None:
            return kept
        report = store.report(record.id)
        row = eval_summary_json(report)
        if (key := ended_key(report.record)) is not None:
            with self._lock:
                self._rows[key] = row
                while len(self._rows) > self.size:
                    self._rows.popitem(last=False)
        return row

    def _kept(self, key: tuple[str, str, str] | None) -> dict[str, Any] | None:
        if key is None:
            return None
        with self._lock:
            row = self._rows.get(key)
            if row is not None:
                self._rows.move_to_end(key)
            return row


def ended_key(record: EvalRecord) -> tuple[str, str, str] | None:
    """What names an eval's row once it ended (None while it runs)."""
    if record.status == "running" or record.finished_at is None:
        return None
    return record.id, record.status, record.finished_at.isoformat()


def store_of(request: Request) -> EvalStore:
    """The evals of the app's client's Redis."""
    return eval_store(client_of(request))


def rows_of(request: Request) -> EndedEvalRows:
    """The app's kept rows (made on first use: creating the app reads no eval)."""
    state = request.app.state
    if not hasattr(state, "ended_eval_rows"):
        state.ended_eval_rows = EndedEvalRows()
    rows: EndedEvalRows = state.ended_eval_rows
    return rows


def listed(
    store: EvalStore, rows: EndedEvalRows, suite: str | None, limit: int
) -> list[dict[str, Any]]:
    """The rows of the evals listed (one that expired as it was read is left out)."""
    found = []
    for record in store.list(limit=limit, suite=suite):
        try:
            found.append(rows.row(store, record))
        except UnknownEvalError:
            continue
    return found


@router.get(
    "/evals",
    dependencies=[Depends(READ)],
    response_model=None,
    responses=documented(list[EvalSummary], 422),
)
async def list_evals(
    request: Request,
    suite: Annotated[str | None, Query(pattern=NAME_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LISTED_EVALS)] = 20,
) -> list[dict[str, Any]]:
    """Evals, newest first (of one suite, if given), with their pass rate and cost."""
    return await in_thread(listed, store_of(request), rows_of(request), suite, limit)


@router.get(
    "/evals/{eval_id}",
    dependencies=[Depends(READ)],
    response_model=None,
    responses=documented(Eval, 404),
)
async def show_eval(eval_id: str, request: Request) -> dict[str, Any]:
    """One eval: its record, every case run's output and scores, per scorer and per
    case-by-scorer statistics (over repeats), cost and judge requests (404 if none)."""
    report = await in_thread(store_of(request).report, eval_id)
    return report_json(report)


@router.get(
    "/evals/{eval_id}/compare",
    dependencies=[Depends(READ)],
    response_model=None,
    responses=documented(EvalComparison, 404, 422),
)
async def compare_evals(
    eval_id: str,
    request: Request,
    baseline: Annotated[str, Query(min_length=1, max_length=100)],
    tolerance: Annotated[float, Query(ge=0.0, le=1.0)] = 0.0,
) -> dict[str, Any]:
    """The eval beside ``baseline``: per scorer both pass rates and means and whether it
    regressed (beyond its tolerance: the suite's, else ``tolerance``); per case the
    scorers that got worse or better, with both outputs."""
    store = store_of(request)
    current = await in_thread(store.report, eval_id)
    earlier = await in_thread(store.report, baseline)
    return comparison_json(compare(current, earlier, tolerance=tolerance))
