"""The dashboard's pages: the runs list, a run, the dead letters, the schedules, the evals
and one eval (beside a baseline, with ``?baseline=``).

Each page is a shell rendered for a logged-in visitor; its JavaScript module reads
``/api/v1`` with the visitor's session cookie. A visitor with no credentials is sent to
``/login`` (HTTP Basic with a token as the password is accepted too, as by the API).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from dagwright.models import RunStatus
from dagwright.server.dashboard.rendering import render
from dagwright.server.dashboard.visitors import Visitor, visitor_of


def login_redirect(request: Request) -> RedirectResponse:
    """To the login page, coming back here afterwards."""
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/login?next={quote(here, safe='')}", status_code=303)


def visitor_context(visitor: Visitor) -> dict[str, Any]:
    """What base.html shows of the visitor: name, scope, the CSRF token of its session."""
    return {
        "principal": True,
        "principal_name": visitor.name,
        "principal_scope": visitor.scope,
        "csrf_token": visitor.csrf_token,
        "can_logout": visitor.csrf_token is not None,
    }


async def page(request: Request, template: str, name: str, **context: Any) -> Response:
    """A page for a logged-in visitor, or the way to the login page."""
    visitor = await visitor_of(request)
    if visitor is None:
        return login_redirect(request)
    return render(template, page=name, **visitor_context(visitor), **context)


def pages_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/")
    async def runs_page(request: Request) -> Response:
        statuses = [status.value for status in RunStatus]
        return await page(request, "runs.html", "runs", run_statuses=statuses)

    @router.get("/runs/{run_id}")
    async def run_page(request: Request, run_id: str) -> Response:
        return await page(request, "run.html", "run", run_id=run_id)

    @router.get("/dlq")
    async def dead_letters_page(request: Request) -> Response:
        return await page(request, "dlq.html", "dlq")

    @router.get("/schedules")
    async def schedules_page(request: Request) -> Response:
        return await page(request, "schedules.html", "schedules")

    @router.get("/evals")
    async def evals_page(request: Request) -> Response:
        return await page(request, "evals.html", "evals")

    @router.get("/evals/{eval_id}")
    async def eval_page(request: Request, eval_id: str) -> Response:
        return await page(request, "eval.html", "evals", eval_id=eval_id)

    return router
