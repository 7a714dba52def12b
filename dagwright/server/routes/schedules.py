"""Schedules: create, list, show, delete, pause, resume, run now."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from dagwright.server.auth import ADMIN, OPERATE, READ, client_of
from dagwright.server.blocking import in_thread

router = APIRouter(tags=["schedules"])


class ScheduleRequest(BaseModel):
    """A schedule, with ``client.schedules.add``'s options."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    cron: str | None = None
    every_s: float | None = None
    timezone: str = "UTC"
    goal: str | None = None
    plan: dict[str, Any] | None = None
    worker_types: list[str] | None = None
    budget: dict[str, Any] | None = None
    overlap: str = "skip"
    catchup: str = "skip"
    max_followups: int = 0
    followup_depth: int = 1
    replace: bool = False


@router.get("/schedules", dependencies=[Depends(READ)])
async def list_schedules(request: Request) -> list[dict[str, Any]]:
    """Every schedule, with its next fire and last run (as ``schedule list --json``)."""
    infos = await in_thread(client_of(request).schedules.list)
    return [info.to_json() for info in infos]


@router.post("/schedules", status_code=201, dependencies=[Depends(ADMIN)])
async def create_schedule(
    body: ScheduleRequest, request: Request, response: Response
) -> dict[str, Any]:
    """Add a schedule (``replace`` to overwrite one of the same name)."""
    options = body.model_dump(exclude={"name"})
    schedules = client_of(request).schedules
    await in_thread(schedules.add, body.name, **options)
    response.headers["Location"] = f"/api/v1/schedules/{body.name}"
    return (await in_thread(schedules.get, body.name)).to_json()


@router.get("/schedules/{name}", dependencies=[Depends(READ)])
async def show_schedule(name: str, request: Request) -> dict[str, Any]:
    """The schedule with its recent fires."""
    return (await in_thread(client_of(request).schedules.get, name)).to_json()


@router.delete("/schedules/{name}", dependencies=[Depends(ADMIN)])
async def delete_schedule(name: str, request: Request) -> dict[str, Any]:
    """Remove the schedule (its runs stay)."""
    await in_thread(client_of(request).schedules.remove, name)
    return {"removed": name}


@router.post("/schedules/{name}/pause", dependencies=[Depends(OPERATE)])
async def pause_schedule(name: str, request: Request) -> dict[str, Any]:
    schedule = await in_thread(client_of(request).schedules.pause, name)
    return schedule.model_dump(mode="json", exclude_none=True)


@router.post("/schedules/{name}/resume", dependencies=[Depends(OPERATE)])
async def resume_schedule(name: str, request: Request) -> dict[str, Any]:
    schedule = await in_thread(client_of(request).schedules.resume, name)
    return schedule.model_dump(mode="json", exclude_none=True)


@router.post("/schedules/{name}/run", dependencies=[Depends(OPERATE)])
async def run_schedule_now(name: str, request: Request) -> dict[str, Any]:
    """Fire the schedule now: the fire's outcome and the run it started."""
    fire = await in_thread(client_of(request).schedules.run_now, name)
    return fire.to_json()
