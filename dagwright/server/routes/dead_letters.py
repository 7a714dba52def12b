"""The dead-letter queue: list, show, replay, purge, stats."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict

from dagwright.dlq import Classification, DeadLetterStatus
from dagwright.json_views import letter_json
from dagwright.server.auth import ADMIN, OPERATE, READ, client_of
from dagwright.server.blocking import in_thread
from dagwright.server.openapi import documented
from dagwright.server.resources import (
    DeadLetter,
    DeadLetterStats,
    DeadLetterSummary,
    Purged,
    ReplayOutcome,
)

router = APIRouter(tags=["dead letters"])


class ReplayRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    fresh: bool = False
    """Start an agent's conversation over rather than resume from its checkpoint."""


@router.get(
    "/dlq",
    dependencies=[Depends(READ)],
    response_model=None,
    responses=documented(list[DeadLetterSummary], 422),
)
async def list_letters(
    request: Request,
    run_id: str | None = None,
    worker_type: str | None = None,
    classification: Classification | None = None,
    status: DeadLetterStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> list[dict[str, Any]]:
    """Dead letters, newest first (as ``dlq list --json``: no traceback, no spec)."""
    letters = await in_thread(
        client_of(request).dlq.list,
        run_id=run_id,
        worker_type=worker_type,
        classification=classification,
        status=status,
        limit=limit,
    )
    return [letter_json(letter, full=False) for letter in letters]


@router.get(
    "/dlq/stats",
    dependencies=[Depends(READ)],
    response_model=None,
    responses=documented(DeadLetterStats),
)
async def stats(request: Request) -> dict[str, Any]:
    """Counts by classification, worker type and status."""
    found = await in_thread(client_of(request).dlq.stats)
    return found.model_dump(mode="json")


@router.get(
    "/dlq/{entry_id}",
    dependencies=[Depends(READ)],
    response_model=None,
    responses=documented(DeadLetter, 404),
)
async def show(entry_id: str, request: Request) -> dict[str, Any]:
    """One dead letter in full (its traceback is redacted when recorded)."""
    return letter_json(await in_thread(client_of(request).dlq.get, entry_id), full=True)


@router.post(
    "/dlq/{entry_id}/replay",
    dependencies=[Depends(OPERATE)],
    response_model=None,
    responses=documented(
        ReplayOutcome, 400, 403, 404, 409, 413, 422, conflict="It cannot be replayed (see detail)."
    ),
)
async def replay(
    entry_id: str, request: Request, body: ReplayRequest | None = None
) -> dict[str, Any]:
    """Run the node again, re-opening its run (409 if it cannot be replayed)."""
    fresh = (body or ReplayRequest()).fresh
    result = await in_thread(client_of(request).dlq.replay, entry_id, fresh=fresh)
    return result.to_json()


@router.delete(
    "/dlq/{entry_id}",
    dependencies=[Depends(ADMIN)],
    response_model=None,
    responses=documented(Purged, 403, 404),
)
async def purge(entry_id: str, request: Request) -> dict[str, Any]:
    """Delete the dead letter."""
    await in_thread(client_of(request).dlq.purge, entry_id)
    return {"purged": 1}
