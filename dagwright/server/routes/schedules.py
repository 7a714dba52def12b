"""Schedules: create, list, show, delete, pause, resume, run now."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import JsonDict

from dagwright.schedules.definition import NAME_PATTERN, Catchup, Overlap
from dagwright.server.auth import ADMIN, OPERATE, READ, client_of
from dagwright.server.blocking import in_thread
from dagwright.server.openapi import LOCATION, documented, exactly_one
from dagwright.server.resources import (
    ScheduleDefinition,
    ScheduleFire,
    ScheduleRemoved,
    ScheduleState,
)

router = APIRouter(tags=["schedules"])


CRON_XOR_EVERY_GOAL_XOR_PLAN: JsonDict = {
    "allOf": [exactly_one("cron", "every_s"), exactly_one("goal", "plan")]
}


class ScheduleRequest(BaseModel):
    """A schedule, with ``client.schedules.add``'s options."""

    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra=CRON_XOR_EVERY_GOAL_XOR_PLAN
    )

    name: str = Field(pattern=NAME_PATTERN)
    cron: str | None = None
    every_s: float | None = Field(None, ge=1, le=366 * 24 * 3600)
    timezone: str = "UTC"
    goal: str | None = None
    plan: dict[str, Any] | None = None
    worker_types: list[str] | None = None
    budget: dict[str, Any] | None = None
    overlap: Overlap = Field(Overlap.SKIP, strict=False)
    catchup: Catchup = Field(Catchup.SKIP, strict=False)
    max_followups: int = Field(0, ge=0, le=20)
    followup_depth: int = Field(1, ge=1, le=5)
    replace: bool = False


@router.get(
    "/schedules",
    dependencies=[Depends(READ)],
    response_model=None,
    responses=documented(list[ScheduleState]),
)
async def list_schedules(request: Request) -> list[dict[str, Any]]:
    """Every schedule, with its next fire and last run (as ``schedule list --json``)."""
    infos = await in_thread(client_of(request).schedules.list)
    return [info.to_json() for info in infos]


@router.post(
    "/schedules",
    status_code=201,
    dependencies=[Depends(ADMIN)],
    response_model=None,
    responses=documented(ScheduleState, 400, 403, 413, 422, status=201, headers=LOCATION),
)
async def create_schedule(
    body: ScheduleRequest, request: Request, response: Response
) -> dict[str, Any]:
    """Add a schedule (``replace`` to overwrite one of the same name)."""
    options = body.model_dump(exclude={"name"})
    schedules = client_of(request).schedules
    await in_thread(schedules.add, body.name, **options)
    response.headers["Location"] = f"/api/v1/schedules/{body.name}"
    return (await in_thread(schedules.get, body.name)).to_json()


@router.get(
    "/schedules/{name}",
    dependencies=[Depends(READ)],
    response_model=None,
    responses=documented(ScheduleState, 404),
)
async def show_schedule(name: str, request: Request) -> dict[str, Any]:
    """The schedule with its recent fires."""
    return (await in_thread(client_of(request).schedules.get, name)).to_json()


@router.delete(
    "/schedules/{name}",
    dependencies=[Depends(ADMIN)],
    response_model=None,
    responses=documented(ScheduleRemoved, 403, 404),
)
async def delete_schedule(name: str, request: Request) -> dict[str, Any]:
    """Remove the schedule (its runs stay)."""
    await in_thread(client_of(request).schedules.remove, name)
    return {"removed": name}


@router.post(
    "/schedules/{name}/pause",
    dependencies=[Depends(OPERATE)],
    response_model=None,
    responses=documented(ScheduleDefinition, 403, 404),
)
async def pause_schedule(name: str, request: Request) -> dict[str, Any]:
    schedule = await in_thread(client_of(request).schedules.pause, name)
    return schedule.model_dump(mode="json", exclude_none=True)


@router.post(
    "/schedules/{name}/resume",
    dependencies=[Depends(OPERATE)],
    response_model=None,
    responses=documented(ScheduleDefinition, 403, 404),
)
async def resume_schedule(name: str, request: Request) -> dict[str, Any]:
    schedule = await in_thread(client_of(request).schedules.resume, name)
    return schedule.model_dump(mode="json", exclude_none=True)


@router.post(
    "/schedules/{name}/run",
    dependencies=[Depends(OPERATE)],
    response_model=None,
    responses=documented(ScheduleFire, 403, 404),
)
async def run_schedule_now(name: str, request: Request) -> dict[str, Any]:
    """Fire the schedule now: the fire's outcome and the run it started."""
    fire = await in_thread(client_of(request).schedules.run_now, name)
    return fire.to_json()
