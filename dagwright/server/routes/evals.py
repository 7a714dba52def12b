"""Evals: list them, read one (cases by scorers and their statistics), compare two.

Read only: an eval is run by ``dagwright eval`` (it submits ordinary runs, which
``/runs`` shows), and these routes read what it stored (``evals/store.py``). The shapes
are ``dagwright evals … --json``'s (``evals/json_views.py``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from dagwright.evals.baselines import compare
from dagwright.evals.json_views import comparison_json, eval_json, eval_summary_json
from dagwright.evals.store import EvalStore
from dagwright.evals.suite import NAME_PATTERN
from dagwright.server.auth import READ, client_of
from dagwright.server.blocking import in_thread

router = APIRouter(tags=["evals"])

# A list row carries each eval's pass rate and cost, read from all its results: the list
# is kept short rather than the rows thin.
MAX_LISTED_EVALS = 100


def store_of(request: Request) -> EvalStore:
    """The evals of the app's client's Redis."""
    client = client_of(request)
    runtime = client.runtime
    return EvalStore(runtime.client, runtime.keys, client.settings.eval_retention_s)


def listed(store: EvalStore, suite: str | None, limit: int) -> list[dict[str, Any]]:
    return [
        eval_summary_json(store.report(record.id))
        for record in store.list(limit=limit, suite=suite)
    ]


@router.get("/evals", dependencies=[Depends(READ)])
async def list_evals(
    request: Request,
    suite: Annotated[str | None, Query(pattern=NAME_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LISTED_EVALS)] = 20,
) -> list[dict[str, Any]]:
    """Evals, newest first (of one suite, if given), with their pass rate and cost."""
    return await in_thread(listed, store_of(request), suite, limit)


@router.get("/evals/{eval_id}", dependencies=[Depends(READ)])
async def show_eval(eval_id: str, request: Request) -> dict[str, Any]:
    """One eval: its record, every case run's output and scores, per scorer and per
    case-by-scorer statistics (over repeats), cost and judge requests (404 if none)."""
    report = await in_thread(store_of(request).report, eval_id)
    return eval_json(report)


@router.get("/evals/{eval_id}/compare", dependencies=[Depends(READ)])
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
