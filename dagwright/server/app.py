"""``create_app``: the FastAPI application of ``dagwright server``.

Why FastAPI: request bodies and query parameters are typed (pydantic, which dagwright's
models already are), and the OpenAPI document comes from the routes themselves, so it
cannot drift from what is served. It is served at ``/api/v1/openapi.json`` to callers
with the read scope, like every route; there is no docs page: FastAPI's loads Swagger UI
from a CDN (a third-party script in our origin), and no well-kept package ships its
files to serve ourselves. Any OpenAPI viewer opens the document. It runs on Starlette, whose
StreamingResponse carries the event stream and whose thread pool runs the client's
blocking calls. Rejected: Flask (WSGI: one thread per open event stream, no OpenAPI),
bare Starlette (the same server, with the schema and the validation written by hand).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute

from dagwright.client import Client
from dagwright.server.blocking import in_thread
from dagwright.server.openapi import api_document
from dagwright.server.problems import install_problem_handlers
from dagwright.settings import Settings

if TYPE_CHECKING:
    from dagwright.server.local_access import LocalAccess
    from dagwright.server.mcp_endpoint import McpEndpoint

API_PREFIX = "/api/v1"


def api_router() -> APIRouter:
    """Every ``/api/v1`` route (imported here: ``import dagwright`` loads none of them)."""
    from dagwright.server.routes import (
        approvals,
        dead_letters,
        evals,
        events,
        logs,
        memory,
        runs,
        schedules,
        scores,
        system,
    )

    router = APIRouter()
    for module in (
        system,
        runs,
        events,
        logs,
        scores,
        approvals,
        dead_letters,
        schedules,
        evals,
        memory,
    ):
        router.include_router(module.router)
    return router


def create_app(
    settings: Settings | None = None,
    *,
    local_access: LocalAccess | None = None,
    client: Client | None = None,
) -> FastAPI:
    """The API under ``/api/v1`` (its OpenAPI document at ``/api/v1/openapi.json``, read
    scope) and the dashboard's pages, over one ``Client``.

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
        openapi_url=None,  # served by routes/system.py, behind authentication
        docs_url=None,
        redoc_url=None,
        lifespan=serving,
        generate_unique_id_function=operation_id,
    )
    app.state.client = client or Client(settings)
    app.state.local_access = local_access
    install_problem_handlers(app)
    app.state.mcp = mount_mcp(app, app.state.client)
    app.include_router(api_router(), prefix=API_PREFIX)
    app.include_router(dashboard_router())
    app.openapi = functools.partial(api_document, app)  # type: ignore[method-assign]
    install_front_middleware(app, app.state.client.settings, local_access=local_access is not None)
    return app


def operation_id(route: APIRoute) -> str:
    """An operation's id in the OpenAPI document: its function's name (``submit_run``),
    what a generated client names its function (FastAPI's default adds the path and the
    method: ``submit_run_api_v1_runs_post``)."""
    return route.name


def install_front_middleware(app: FastAPI, settings: Settings, *, local_access: bool) -> None:
    """What runs before routing, authentication and parsing: ``HEAD`` as ``GET``, the
    body limit (an oversized body costs nothing), and, outside it, the trusted proxies'
    headers.

    No proxy headers on a server with local access (``dagwright up``'s, on loopback,
    with no proxy in front): nothing there may be decided on a forwarded address or
    scheme."""
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    from dagwright.server.body_limit import BodyLimit
    from dagwright.server.methods import HeadAsGet

    app.add_middleware(HeadAsGet)
    app.add_middleware(BodyLimit, max_bytes=settings.server.max_request_bytes)
    if settings.server.trusted_proxies and not local_access:
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=settings.server.trusted_proxies)


def mount_mcp(app: FastAPI, client: Client) -> McpEndpoint | None:
    """The MCP server at ``/mcp`` (``server/mcp_endpoint.py``), behind the API's tokens; None
    without the ``mcp`` extra (the API and the dashboard serve on without it)."""
    try:
        from dagwright.server.mcp_endpoint import MCP_PATH, McpEndpoint
    except ImportError:
        return None
    from starlette.routing import Route

    endpoint = McpEndpoint(client)
    app.router.routes.append(Route(MCP_PATH, endpoint, methods=["GET", "POST", "DELETE"]))
    return endpoint


@asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[None]:
    """The app's lifetime: the MCP endpoint's request handling runs meanwhile; the
    local-access token is revoked at the end."""
    mcp: McpEndpoint | None = app.state.mcp
    async with closing_local_access(app):
        if mcp is None:
            yield
            return
        async with mcp.running():
            yield


@asynccontextmanager
async def closing_local_access(app: FastAPI) -> AsyncIterator[None]:
    """Revoke the local-access token and remove its file when the server stops."""
    try:
        yield
    finally:
        access: LocalAccess | None = app.state.local_access
        if access is not None:
            await in_thread(access.close, app.state.client)
