"""A run's scores: feedback given over the API (operate scope), and read back (read)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat

from dagwright.client.scoring import author_name
from dagwright.models import MAX_SCORE_COMMENT, SCORE_NAME_PATTERN, RunScore
from dagwright.server.auth import OPERATE, READ, Principal, client_of
from dagwright.server.blocking import in_thread
from dagwright.server.openapi import problem_responses

router = APIRouter(tags=["scores"])

Operator = Annotated[Principal, Depends(OPERATE)]

API_SOURCE = "api"


class ScoreRequest(BaseModel):
    """A score to give the run; who gives it is the caller's token, where from ``api``.
    Checked as ``Client.score`` checks it (its one line as a 422's ``detail``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(json_schema_extra={"pattern": SCORE_NAME_PATTERN})
    """What is scored: 1-64 lowercase letters, digits, ``_``, ``.``, ``-``."""
    value: StrictBool | StrictFloat
    """A finite number, or a boolean (1.0 or 0.0)."""
    comment: str | None = Field(None, json_schema_extra={"maxLength": MAX_SCORE_COMMENT})
    """Why (at most 2000 characters)."""


@router.post(
    "/runs/{run_id}/scores", status_code=201, responses=problem_responses(400, 403, 404, 413, 422)
)
async def add_score(
    run_id: str, body: ScoreRequest, request: Request, principal: Operator
) -> RunScore:
    """Score the run (now, or long after it ended): the score as kept, 201. 404 for an
    unknown or expired run; 422 for a bad score, or past the most a run may hold."""
    return await in_thread(
        client_of(request).score,
        run_id,
        body.name,
        body.value,
        body.comment,
        source=API_SOURCE,
        by=author_name(principal.name),
    )


@router.get("/runs/{run_id}/scores", dependencies=[Depends(READ)], responses=problem_responses(404))
async def list_scores(run_id: str, request: Request) -> list[RunScore]:
    """Every score of the run, oldest first."""
    return await in_thread(client_of(request).scores, run_id)
