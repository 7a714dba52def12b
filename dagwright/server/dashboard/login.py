"""Logging in and out of the dashboard: a token becomes a session cookie.

``POST /login`` checks the token through ``dagwright.server.sessions`` (hashed tokens,
sessions in Redis) and sets the cookie HttpOnly, SameSite=Strict, Secure on https.
``POST /logout`` ends the session; like every state change made with the cookie, it must
carry the session's CSRF token (the form field the page renders).
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import RedirectResponse, Response

from dagwright.server.dashboard.rendering import render
from dagwright.server.dashboard.visitors import (
    LoginRefused,
    close_session,
    open_session,
    session_cookie,
    visitor_of,
)


def safe_next(value: str | None) -> str:
    """Where to go after logging in: a path of this site only (no open redirect)."""
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")):
        return "/"
    return value


def login_page(next_path: str, error: str | None = None, status_code: int = 200) -> Response:
    return render(
        "login.html",
        status_code=status_code,
        principal=False,
        csrf_token=None,
        next_path=next_path,
        error=error,
    )


def login_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/login")
    async def show_login(
        request: Request, next_path: Annotated[str | None, Query(alias="next")] = None
    ) -> Response:
        if await visitor_of(request) is not None:
            return RedirectResponse(safe_next(next_path), status_code=303)
        return login_page(safe_next(next_path))

    @router.post("/login")
    async def log_in(
        request: Request,
        token: Annotated[str, Form()],
        next_path: Annotated[str, Form(alias="next")] = "/",
    ) -> Response:
        try:
            session_id, ttl_s = await open_session(request, token.strip())
        except LoginRefused as refused:
            return login_page(safe_next(next_path), str(refused), status_code=401)
        response = RedirectResponse(safe_next(next_path), status_code=303)
        response.set_cookie(
            session_cookie(),
            session_id,
            max_age=ttl_s,
            path="/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    @router.post("/logout")
    async def log_out(request: Request, csrf_token: Annotated[str, Form()] = "") -> Response:
        visitor = await visitor_of(request)
        if visitor is not None and visitor.csrf_token is not None:
            if not hmac.compare_digest(csrf_token, visitor.csrf_token):
                return Response("missing or wrong CSRF token", status_code=403)
            await close_session(request, visitor)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(session_cookie(), path="/")
        return response

    return router
