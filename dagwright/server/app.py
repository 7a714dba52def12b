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

from fastapi import APIRouter, FastAPI

from dagwright.client import Client
from dagwright.server.problems import install_problem_handlers
from dagwright.settings import Settings

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
    allow_anonymous: bool = False,
    client: Client | None = None,
) -> FastAPI:
    """The API under ``/api/v1`` (its OpenAPI document at ``/api/v1/openapi.json``, read
    scope) and the dashboard's pages, over one ``Client``.

    ``allow_anonymous`` lets requests without a credential act as admin: only for a
    server bound to a loopback address (``dagwright server`` checks; ``dagwright up``
    sets it).
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
    )
    app.state.client = client or Client(settings)
    app.state.allow_anonymous = allow_anonymous
    install_problem_handlers(app)
    app.include_router(api_router(), prefix=API_PREFIX)
    app.include_router(dashboard_router())
    install_front_middleware(app, app.state.client.settings, allow_anonymous=allow_anonymous)
    return app


def install_front_middleware(app: FastAPI, settings: Settings, *, allow_anonymous: bool) -> None:
    """What runs before routing, authentication and parsing: the body limit (an
    oversized body costs nothing), and, outside it, the trusted proxies' headers.

    No proxy headers on a server with anonymous access (``dagwright up``'s, on loopback,
    with no proxy in front): a forged X-Forwarded-For would choose the client address
    that anonymous access is decided on."""
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    from dagwright.server.body_limit import BodyLimit

    app.add_middleware(BodyLimit, max_bytes=settings.server_max_request_bytes)
    if settings.server_trusted_proxies and not allow_anonymous:
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=settings.server_trusted_proxies)
