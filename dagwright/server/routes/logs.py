"""A run's node logs (read scope): what its nodes printed and logged, a page at a time."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict

from dagwright.models import NodeLogLine
from dagwright.server.auth import READ, client_of
from dagwright.server.blocking import in_thread
from dagwright.server.openapi import problem_responses

router = APIRouter(tags=["logs"])

MAX_PAGE_LINES = 1000
CURSOR_PATTERN = r"^\d{1,20}-\d{1,20}$"


class RunLogs(BaseModel):
    """A page of the run's node logs, oldest first."""

    model_config = ConfigDict(frozen=True)

    lines: list[NodeLogLine]
    after: str | None
    """The cursor to read on from (``?after=``): the last line's id, or the cursor given
    when no line came (null if none was given)."""


@router.get(
    "/runs/{run_id}/logs", dependencies=[Depends(READ)], responses=problem_responses(404, 422)
)
async def run_logs(
    run_id: str,
    request: Request,
    node: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    after: Annotated[str | None, Query(pattern=CURSOR_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_LINES)] = MAX_PAGE_LINES,
) -> RunLogs:
    """The run's node log lines (only ``node``'s, if given) after the cursor ``after``, at
    most ``limit``: what each node attempt printed (stdout, stderr) and logged, redacted
    and bounded. 404 for an unknown or expired run, or a node it does not have."""
    lines = await in_thread(client_of(request).logs, run_id, node, after, limit=limit)
    return RunLogs(lines=lines, after=lines[-1].id if lines else after)
