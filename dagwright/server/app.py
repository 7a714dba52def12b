"""``create_app``: the FastAPI application of ``dagwright server``.

Why FastAPI: request bodies and query parameters are typed (pydantic, which dagwright's
models already are), and the OpenAPI document and its Swagger UI come from the routes
themselves, so they cannot drift from what is served. It runs on Starlette, whose
StreamingResponse carries the event stream and whose thread pool runs the client's
blocking calls. Rejected: Flask (WSGI: one thread per open event stream, no OpenAPI),
bare Starlette (the same server, with the schema and the validation written by hand).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import APIRouter, FastAPI

from dagwright.client import Client
from dagwright.server.blocking import in_thread
from dagwright.server.problems import install_problem_handlers
from dagwright.settings import Settings

if TYPE_CHECKING:
    from dagwright.server.local_access import LocalAccess

API_PREFIX = "/api/v1"


def api_router() -> APIRouter:
    """Every ``/api/v1`` route (imported here: ``import dagwright`` loads none of them)."""
    from dagwright.server.routes import approvals, dead_letters, events, runs, schedules, system

    router = APIRouter()
    for module in (system, runs, events, approvals, dead_letters, schedules):
        router.include_router(module.router)
    return router


def create_app(
    settings: Settings | None = None,
    *,
    local_access: LocalAccess | None = None,
    client: Client | None = None,
) -> FastAPI:
    """The API under ``/api/v1`` (OpenAPI at ``/api/v1/openapi.json``, Swagger UI at
    ``/api/v1/docs``) and the dashboard's pages, over one ``Client``.

    ``local_access``: the token this server made for its own user, whose one-time login
    links ``/login/local`` takes (``server/local_access.py``; ``dagwright up`` and
    ``dagwright server --local-access``); None: no such links. The app closes it when
    it shuts down (uvicorn then re-raises SIGTERM: no ``finally`` after it would run).
    """
    from importlib.metadata import version

    from dagwright.server.dashboard import dashboard_router

    app = FastAPI(
        title="dagwright",
        version=version("dagwright"),
        summary="Submit and follow runs of dependency DAGs of tasks and LLM agents.",
        openapi_url=f"{API_PREFIX}/openapi.json",
        docs_url=f"{API_PREFIX}/docs",
        redoc_url=None,
        lifespan=closing_local_access,
    )
    app.state.client = client or Client(settings)
    app.state.local_access = local_access
    install_problem_handlers(app)
    app.include_router(api_router(), prefix=API_PREFIX)
    app.include_router(dashboard_router())
    return app


@asynccontextmanager
async def closing_local_access(app: FastAPI) -> AsyncIterator[None]:
    """Revoke the local-access token and remove its file when the server stops."""
    try:
        yield
    finally:
        access: LocalAccess | None = app.state.local_access
        if access is not None:
            await in_thread(access.close, app.state.client)
