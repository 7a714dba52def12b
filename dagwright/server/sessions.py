"""Dashboard sessions: a login with a token becomes an HttpOnly cookie.

The cookie (``dw_session``) holds a random session id; Redis holds only its sha256, with
the token it was opened with, the scope, and a CSRF token, for ``server_session_ttl_s``
(``client.tokens``). Revoking the token ends its sessions. A request authenticated by the
cookie must carry the session's CSRF token (header ``X-CSRF-Token`` or form field
``csrf_token``) on POST/PUT/PATCH/DELETE: SameSite=Strict already keeps other sites'
forms from sending the cookie, the token is the second lock.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dagwright.client.tokens import Scope
from dagwright.errors import InputError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from dagwright.client import Client

SESSION_COOKIE = "dw_session"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FORM_FIELD = "csrf_token"


@dataclass(frozen=True)
class Session:
    """A dashboard login: the cookie's value (``session_id``) and what it may do."""

    session_id: str
    csrf_token: str
    scope: Scope
    name: str
    token_id: str


def start_session(client: Client, token: str) -> Session:
    """Open a session for ``token`` (InputError if it is no live token). Blocking: call
    it from a thread in async code."""
    info = client.tokens.authenticate(token)
    if info is None:
        raise InputError("this token is not valid: it was revoked, or mistyped")
    session_id = secrets.token_urlsafe(32)
    ttl_s = client.settings.server.session_ttl_s
    record = client.tokens.open_session(session_id, info, ttl_s=ttl_s)
    return Session(session_id, record.csrf_token, record.scope, record.name, record.token_id)


def end_session(client: Client, session_id: str) -> None:
    """End the session (nothing happens if it has ended already). Blocking."""
    client.tokens.close_session(session_id)


def set_session_cookie(response: Response, request: Request, session: Session, ttl_s: int) -> None:
    """Put the session's cookie on ``response``: HttpOnly, SameSite=Strict, Path=/, and
    Secure when the request came over https."""
    response.set_cookie(
        SESSION_COOKIE,
        session.session_id,
        max_age=ttl_s,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.scope.get("scheme") == "https",
    )


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
