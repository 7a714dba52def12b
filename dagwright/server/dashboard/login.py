"""Logging in and out of the dashboard: a token becomes a session cookie.

``POST /login`` checks the token through ``dagwright.server.sessions`` (hashed tokens,
sessions in Redis) and sets the cookie HttpOnly, SameSite=Strict, Secure on https.
``POST /logout`` ends the session; like every state change made with the cookie, it must
carry the session's CSRF token (the form field the page renders). ``GET /login/local``
takes a one-time login link of the server's own user (``server/local_access.py``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import RedirectResponse, Response

from dagwright.server.dashboard.rendering import render
from dagwright.server.dashboard.visitors import LoginRefused, log_in, log_out, visitor_of
from dagwright.server.local_access import CODE_CHARS, LOGIN_PATH, LocalAccess
from dagwright.server.origins import addressed_to_loopback, asked_by_another_site

USED_LINK = (
    "this login link was used already, or is not this server's: "
    "`dagwright dashboard` prints a new one"
)
REVOKED = "this server's own token was revoked: restart it, or log in with another token"


def safe_next(value: str | None) -> str:
    """Where to go after logging in: a path of this site only (no open redirect)."""
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")):
        return "/"
    return value


def login_page(
    next_path: str, error: str | None = None, status_code: int = 200, *, local: bool = False
) -> Response:
    """The login form (``local``: with the way in of the server's own user)."""
    return render(
        "login.html",
        status_code=status_code,
        principal=False,
        csrf_token=None,
        next_path=next_path,
        error=error,
        local=local,
    )


def local_access_of(request: Request) -> LocalAccess | None:
    access: LocalAccess | None = request.app.state.local_access
    return access


async def take_login_link(request: Request, code: str) -> Response:
    """A one-time link opens a session with the server's token, then the dashboard:
    the link left in the browser's history opens nothing more."""
    access = local_access_of(request)
    if access is None or not addressed_to_loopback(request) or not access.take_code(code):
        if await visitor_of(request) is not None:  # the link again, logged in already
            return RedirectResponse("/", status_code=303)
        return login_page("/", USED_LINK, status_code=401, local=access is not None)
    response = RedirectResponse("/", status_code=303)
    response.headers["Cache-Control"] = "no-store"
    response.headers["Referrer-Policy"] = "no-referrer"
    try:
        await log_in(request, access.token, response)
    except LoginRefused:  # revoked by hand (dagwright token revoke)
        return login_page("/", REVOKED, status_code=401, local=True)
    return response


def login_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/login")
    async def show_login(
        request: Request, next_path: Annotated[str | None, Query(alias="next")] = None
    ) -> Response:
        if await visitor_of(request) is not None:
            return RedirectResponse(safe_next(next_path), status_code=303)
        return login_page(safe_next(next_path), local=local_access_of(request) is not None)

    @router.get(LOGIN_PATH)
    async def local_login(
        request: Request, code: Annotated[str, Query(max_length=CODE_CHARS)] = ""
    ) -> Response:
        return await take_login_link(request, code)

    @router.post("/login")
    async def submit_login(
        request: Request,
        token: Annotated[str, Form()],
        next_path: Annotated[str, Form(alias="next")] = "/",
    ) -> Response:
        if asked_by_another_site(request):  # login CSRF: a session of the attacker's token
            return login_page(safe_next(next_path), "log in from this site", status_code=403)
        response = RedirectResponse(safe_next(next_path), status_code=303)
        try:
            await log_in(request, token.strip(), response)
        except LoginRefused as refused:
            return login_page(safe_next(next_path), str(refused), status_code=401)
        return response

    @router.post("/logout")
    async def submit_logout(request: Request) -> Response:
        response = RedirectResponse("/login", status_code=303)
        await log_out(request, response)
        return response

    return router
