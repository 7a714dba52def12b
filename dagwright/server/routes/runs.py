"""Runs: submit, list, read, result, cancel, trace, and one node in full."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from dagwright.client import Client
from dagwright.client.handle import RunHandle, result_of
from dagwright.client.run_options import hinted
from dagwright.json_views import run_json
from dagwright.models import Priority, RunState, RunStatus
from dagwright.server.auth import OPERATE, READ, client_of
from dagwright.server.blocking import in_thread
from dagwright.server.openapi import LOCATION, documented, exactly_one
from dagwright.server.payloads import payload
from dagwright.server.resources import NodeDetail, Run, RunResult, RunsPage, Trace

router = APIRouter(tags=["runs"])


CURSOR_PATTERN = r"^[0-9]{1,20}(:.{0,200})?$"  # next_cursor as a page gave it


class SubmitRequest(BaseModel):
    """A plan, or a goal for the planner (exactly one of them), with the client's submit
    options."""

    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra=exactly_one("plan", "goal")
    )

    plan: dict[str, Any] | None = None
    """The plan, as a plan file's JSON (goal, output, nodes)."""
    goal: str | None = None
    """A goal the planner turns into a plan (instead of ``plan``)."""
    context: str = ""
    worker_types: list[str] | None = None
    max_nodes: int | None = None
    max_depth: int | None = None
    replan: bool | None = None
    budget: dict[str, Any] | None = None
    max_concurrent_nodes: int | None = None
    timeout_s: float | None = None
    response_cache: bool | None = None
    priority: Priority | None = None
    """1 to 5, higher first (default: the plan's, else 3): where the run's nodes stand
    among the nodes waiting for a worker."""
    llm_batch: bool = False
    """Send the run's LLM calls through the Message Batches API: half the price, each
    answered within 24 hours."""
    inputs: dict[str, Any] | None = None
    """The run's inputs, checked against the plan's ``inputs`` schema."""
    webhooks: list[dict[str, Any] | str] = Field(default_factory=list)
    """Told when the run ends: ``{"url", "on", "secret_env"}`` or a URL (signed POSTs)."""
    not_before: str | None = Field(None, max_length=64)
    """ISO 8601 time the run's roots start at (the run is written now)."""
    countdown_s: float | None = None
    """Seconds from now the run's roots start after (instead of ``not_before``)."""
    memory: str | None = Field(None, max_length=63)
    """The memory namespace the run's agents use (``team-digest``: runs naming it share
    their memory); it wins over the plan's ``memory``."""
    idempotency_key: str | None = Field(None, max_length=512)
    """A repeat of the same submit with this key returns the first one's run."""

    @model_validator(mode="before")
    @classmethod
    def known_fields(cls, data: Any) -> Any:
        """An unknown field, named with the nearest known one (or, for a Celery word,
        what to use instead), where ``extra="forbid"`` would say only "not permitted"."""
        if isinstance(data, dict):
            unknown = [str(name) for name in data if name not in cls.model_fields]
            if unknown:
                line = f"unknown field {hinted(unknown, cls.model_fields)}"
                raise PydanticCustomError("extra_forbidden", "{line}", {"line": line})
        return data


class CancelRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    reason: str = "cancelled over the HTTP API"


@router.post(
    "/runs",
    status_code=201,
    dependencies=[Depends(OPERATE)],
    responses={
        **documented(Run, 400, 403, 409, 413, 422, status=201, headers=LOCATION),
        200: {
            "model": Run,
            "description": "The idempotency key named an earlier run: that run.",
            "headers": LOCATION,
        },
    },
)
async def submit_run(
    body: SubmitRequest,
    request: Request,
    idempotency_key: Annotated[str | None, Header(max_length=512)] = None,
) -> JSONResponse:
    """Start a run (201 + Location); the same idempotency key again: 200, the same run."""
    client = client_of(request)
    key = idempotency_key or body.idempotency_key
    handle, state = await in_thread(submit_and_read, client, body, key)
    location = {"Location": f"/api/v1/runs/{handle.run_id}"}
    return payload(run_json(state), status_code=201 if handle.created else 200, headers=location)


def submit_and_read(
    client: Client, body: SubmitRequest, idempotency_key: str | None
) -> tuple[RunHandle, RunState]:
    """Submit the body's RunRequest, then read the run: one trip to a worker thread for
    both."""
    options = body.model_dump(exclude={"plan", "idempotency_key"})
    request = client.run_request(body.plan, caller="Client.submit", **options)
    handle = client.submit(request, idempotency_key=idempotency_key)
    return handle, client.status(handle.run_id)


@router.get("/runs", dependencies=[Depends(READ)], responses=documented(RunsPage, 422))
async def list_runs(
    request: Request,
    status: RunStatus | None = None,
    q: str = "",
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(pattern=CURSOR_PATTERN)] = None,
) -> JSONResponse:
    """Run summaries (no nodes), newest first, filtered by status and goal/id text."""
    client = client_of(request)
    page = await in_thread(client.find_runs, status=status, text=q, limit=limit, cursor=cursor)
    runs = [summary_json(state) for state in page.runs]
    return payload({"runs": runs, "next_cursor": page.next_cursor})


def summary_json(state: RunState) -> dict[str, Any]:
    """A run of a list: ``run_json`` without its nodes."""
    return {key: value for key, value in run_json(state).items() if key != "nodes"}


@router.get("/runs/{run_id}", dependencies=[Depends(READ)], responses=documented(Run, 404))
async def get_run(run_id: str, request: Request) -> JSONResponse:
    """The run, as ``dagwright status --json`` prints it."""
    return payload(run_json(await in_thread(client_of(request).status, run_id)))


@router.get(
    "/runs/{run_id}/result",
    dependencies=[Depends(READ)],
    responses=documented(RunResult, 404, 409, conflict="The run failed, was cancelled or runs."),
)
async def get_result(run_id: str, request: Request) -> JSONResponse:
    """``{"run_id", "result"}`` of a succeeded run; 409 for a failed, cancelled or
    unfinished one (with the line the CLI prints)."""
    state = await in_thread(client_of(request).status, run_id)
    return payload({"run_id": run_id, "result": result_of(state)})


@router.post(
    "/runs/{run_id}/cancel",
    dependencies=[Depends(OPERATE)],
    responses=documented(Run, 400, 403, 404, 413, 422),
)
async def cancel_run(
    run_id: str, request: Request, body: CancelRequest | None = None
) -> JSONResponse:
    """Cancel the run; the run as it is now."""
    reason = (body or CancelRequest()).reason
    return payload(run_json(await in_thread(client_of(request).cancel, run_id, reason)))


@router.get("/runs/{run_id}/trace", dependencies=[Depends(READ)], responses=documented(Trace, 404))
async def get_trace(run_id: str, request: Request) -> JSONResponse:
    """The trace, as ``dagwright trace --format json`` prints it."""
    trace = await in_thread(client_of(request).trace, run_id)
    return payload(trace.model_dump(mode="json"))


@router.get(
    "/runs/{run_id}/nodes/{node_id}",
    dependencies=[Depends(READ)],
    responses=documented(NodeDetail, 404),
)
async def get_node(run_id: str, node_id: str, request: Request) -> JSONResponse:
    """One node in full: state, spec, inputs, transcript, LLM calls, spans."""
    detail = await in_thread(client_of(request).node, run_id, node_id)
    return payload(detail.to_json())
