"""Health, who is asking, the worker types, and the OpenAPI document."""

from __future__ import annotations

from importlib.metadata import version
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from dagwright.server.auth import READ, Principal, client_of
from dagwright.server.blocking import in_thread
from dagwright.server.openapi import documented
from dagwright.server.resources import Caller, Health, WorkerType

ReadPrincipal = Annotated[Principal, Depends(READ)]

router = APIRouter(tags=["system"])


@router.get("/health", response_model=None, responses=documented(Health))
async def health(principal: ReadPrincipal) -> dict[str, Any]:
    """``{"status": "ok", "version"}``: the server answers (read scope)."""
    return {"status": "ok", "version": version("dagwright")}


@router.get("/whoami", response_model=None, responses=documented(Caller))
async def whoami(principal: ReadPrincipal) -> dict[str, Any]:
    """The caller's name and scope; a cookie session's CSRF token, which the dashboard
    sends back on every change."""
    return principal.to_json()


@router.get(
    "/worker-types",
    dependencies=[Depends(READ)],
    response_model=None,
    responses=documented(list[WorkerType]),
)
async def worker_types(request: Request) -> list[dict[str, Any]]:
    """Every registered worker type, as ``dagwright worker-types --json`` prints it."""
    return await in_thread(client_of(request).worker_types)


@router.get("/openapi.json", dependencies=[Depends(READ)], include_in_schema=False)
async def openapi_document(request: Request) -> JSONResponse:
    """The API's OpenAPI document (read scope, like every route: it maps the surface)."""
    return JSONResponse(request.app.openapi())
