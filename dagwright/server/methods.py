"""HTTP methods as RFC 9110 asks: ``HEAD`` wherever ``GET`` is, and a 405's ``Allow``
naming every method of the path.

FastAPI's routes answer only the methods they declare (Starlette's own add ``HEAD`` to a
``GET``), and a path served by two routes (``GET`` and ``POST /runs``) is answered 405
by the first of them, whose ``Allow`` names its method alone. ``HeadAsGet`` runs a
``HEAD`` as the ``GET`` and sends its status and headers only; ``allowed_methods`` reads
the path's methods in the OpenAPI document.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from starlette.routing import Match

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.types import ASGIApp, Message, Receive, Scope, Send


def allowed_methods(request: Request) -> str:
    """The ``Allow`` of a 405: the methods of the path in the OpenAPI document (matched
    as OpenAPI matches them: a concrete path before a templated one, so ``/dlq/stats``
    is not ``/dlq/{entry_id}``), or, for a path it does not list (a dashboard page),
    each method some route answers there."""
    allowed = documented_methods(request) or probed_methods(request)
    if "GET" in allowed:
        allowed.add("HEAD")
    return ", ".join(sorted(allowed))


def documented_methods(request: Request) -> set[str]:
    path = request.url.path
    paths: dict[str, dict[str, object]] = request.app.openapi()["paths"]
    matching = [template for template in paths if re.fullmatch(template_regex(template), path)]
    if not matching:
        return set()
    template = min(matching, key=lambda template: template.count("{"))
    return {method.upper() for method in paths[template]}


def template_regex(template: str) -> str:
    return "".join(
        "[^/]+" if part.startswith("{") else re.escape(part)
        for part in re.split(r"(\{[^}]+\})", template)
    )


def probed_methods(request: Request) -> set[str]:
    """Asked of the routes one method at a time (``BaseRoute.matches``, public): FastAPI
    keeps an included router as one route, whose own methods say nothing."""
    return {
        method
        for method in METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] == Match.FULL
            for route in request.app.router.routes
        )
    }


class HeadAsGet:
    """Answer ``HEAD`` as ``GET`` without the body (pure ASGI, in front of the app).

    The app is told the client left once the headers are sent, so a ``HEAD`` of the
    event stream ends its stream instead of following the run."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        ended = False

        async def headers_only(message: Message) -> None:
            nonlocal ended
            if ended:
                return
            if message["type"] == "http.response.body":
                ended = True
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        async def until_ended() -> Message:
            if ended:
                return {"type": "http.disconnect"}
            return await receive()

        await self.app({**scope, "method": "GET"}, until_ended, headers_only)
