"""Who is visiting the dashboard: the one place the pages meet the API's authentication
(``dagwright.server.auth`` and ``dagwright.server.sessions``), so that the pages and the
API accept exactly the same credentials: a session cookie, a Bearer token, HTTP Basic
with the token as the password, or anonymity on a loopback ``dagwright up``.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request, Response

from dagwright.errors import InputError
from dagwright.server.auth import check_csrf, client_of, require_page_login
from dagwright.server.blocking import in_thread
from dagwright.server.sessions import (
    SESSION_COOKIE,
    clear_session_cookie,
    end_session,
    set_session_cookie,
    start_session,
)


class LoginRefused(Exception):
    """The token given to the login form opens no session (unknown, revoked, mistyped)."""


@dataclass(frozen=True)
class Visitor:
    """A logged-in visitor as the pages need it."""

    name: str
    scope: str
    csrf_token: str | None
    """Set for a cookie session: the pages send it with every state change."""
    session_id: str | None


async def visitor_of(request: Request) -> Visitor | None:
    """The visitor, or None when the request carries no valid credential."""
    principal = await require_page_login(request)
    if principal is None:
        return None
    via_session = principal.via == "session"
    return Visitor(
        name=principal.name,
        scope=principal.scope.value,
        csrf_token=principal.csrf_token,
        session_id=request.cookies.get(SESSION_COOKIE) if via_session else None,
    )


async def log_in(request: Request, token: str, response: Response) -> None:
    """Open a session for ``token`` and put its cookie on ``response`` (LoginRefused if
    the token is not a live one)."""
    client = client_of(request)
    try:
        session = await in_thread(start_session, client, token)
    except InputError as refused:
        raise LoginRefused(str(refused)) from refused
    set_session_cookie(response, request, session, client.settings.server.session_ttl_s)


async def log_out(request: Request, response: Response) -> None:
    """End the visitor's session (it must send the session's CSRF token) and clear the
    cookie on ``response``."""
    principal = await require_page_login(request)
    if principal is not None and principal.via == "session":
        await check_csrf(request, principal)
        session_id = request.cookies.get(SESSION_COOKIE, "")
        await in_thread(end_session, client_of(request), session_id)
    clear_session_cookie(response)
