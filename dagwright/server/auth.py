"""Who is asking, and may they: credentials, principals and scope checks.

Credentials, the first present wins: ``Authorization: Bearer <token>``; HTTP Basic with
the token as the password (any user name: ``curl -u :$TOKEN``); the dashboard's session
cookie. A request with none is refused (401): no server lets anyone in by where a
request comes from. ``dagwright up``'s user gets in with the token its server made for
them (``local_access.py``), read from a file only they can read. A credential that is
present but wrong is refused (401) too.

Scopes: read < operate < admin (``client.tokens.Scope``). Each route depends on
``require(scope)``; a cookie-authenticated POST/PUT/PATCH/DELETE must also carry the
session's CSRF token.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from fastapi import Request, Security

from dagwright.client.tokens import Scope
from dagwright.server.blocking import in_thread
from dagwright.server.openapi import BASIC, BEARER, SESSION
from dagwright.server.origins import asked_by_another_site
from dagwright.server.problems import Problem
from dagwright.server.sessions import CSRF_FORM_FIELD, CSRF_HEADER, SESSION_COOKIE

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from dagwright.client import Client

CHALLENGE = 'Bearer realm="dagwright", Basic realm="dagwright"'
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")

Via = Literal["bearer", "basic", "session"]


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: a token's name and scope."""

    name: str
    scope: Scope
    via: Via
    token_id: str | None = None
    csrf_token: str | None = None
    """The session's CSRF token (cookie sessions only)."""

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "scope": self.scope.value,
            "anonymous": False,  # kept for clients of the API: nobody is anonymous now
            "csrf_token": self.csrf_token,
        }


def client_of(request: Request) -> Client:
    """The app's one client (``create_app`` made it)."""
    client: Client = request.app.state.client
    return client


def unauthorized(detail: str) -> Problem:
    return Problem(401, detail, headers={"WWW-Authenticate": CHALLENGE})


async def current_principal(request: Request) -> Principal | None:
    """Who the request acts for, or None if it carries no credential. A wrong
    credential raises a 401 problem. Cached on the request."""
    if "dw_principal" in request.scope:
        found: Principal | None = request.scope["dw_principal"]
        return found
    principal = await _authenticate(request)
    request.scope["dw_principal"] = principal
    return principal


async def _authenticate(request: Request) -> Principal | None:
    client = client_of(request)
    header = request.headers.get("authorization")
    if header:
        return await _from_header(client, header)
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        return await _from_session(client, cookie)
    return None


async def _from_header(client: Client, header: str) -> Principal:
    kind, _, credential = header.partition(" ")
    kind = kind.lower()
    via: Via
    if kind == "bearer":
        token, via = credential.strip(), "bearer"
    elif kind == "basic":
        token, via = basic_password(credential.strip()), "basic"
    else:
        raise unauthorized("use Authorization: Bearer <token>, or Basic with the token as password")
    info = await in_thread(client.tokens.authenticate, token) if token else None
    if info is None:
        raise unauthorized("this token is not valid: it was revoked, or mistyped")
    return Principal(name=info.name, scope=info.scope, via=via, token_id=info.id)


def basic_password(credential: str) -> str:
    """The password of a Basic credential ("" if it is malformed)."""
    try:
        decoded = base64.b64decode(credential, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return ""
    return decoded.partition(":")[2]


async def _from_session(client: Client, session_id: str) -> Principal:
    record = await in_thread(client.tokens.session, session_id)
    if record is None:
        raise unauthorized("your session has ended: log in again")
    return Principal(
        name=record.name,
        scope=record.scope,
        via="session",
        token_id=record.token_id,
        csrf_token=record.csrf_token,
    )


def require(scope: Scope) -> Callable[[Request], Awaitable[Principal]]:
    """A dependency: the request's principal, if it holds ``scope`` (401/403 if not;
    403 too for a cookie-authenticated change without its CSRF token). The three
    security schemes say so in the OpenAPI document, ``scope`` as their role; they read
    nothing (``openapi.DocumentedScheme``)."""

    roles = [scope.value]

    async def principal_with_scope(
        request: Request,
        _bearer: None = Security(BEARER, scopes=roles),
        _basic: None = Security(BASIC, scopes=roles),
        _session: None = Security(SESSION, scopes=roles),
    ) -> Principal:
        principal = await current_principal(request)
        if principal is None:
            raise unauthorized("authentication required: send an API token (dagwright token)")
        if not principal.scope.allows(scope):
            raise Problem(
                403, f"this needs the {scope.value} scope; your token has {principal.scope.value}"
            )
        if request.method in UNSAFE_METHODS and principal.via != "bearer":
            refuse_other_sites(request)
            if principal.via == "session":
                await check_csrf(request, principal)
        return principal

    return principal_with_scope


def refuse_other_sites(request: Request) -> None:
    """A change made with a credential the browser attaches by itself (cookie, cached
    Basic) must not be asked by a page of another site
    (``server/origins.py``)."""
    if asked_by_another_site(request):
        raise Problem(
            403,
            "a change asked by another site's page is refused: send it from this site",
            error="CSRFError",
        )


async def check_csrf(request: Request, principal: Principal) -> None:
    """The session's CSRF token must come with a change (header or form field)."""
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and request.headers.get("content-type", "").startswith(FORM_TYPES):
        field = (await request.form()).get(CSRF_FORM_FIELD)
        sent = field if isinstance(field, str) else None
    expected = principal.csrf_token or ""
    if not sent or not hmac.compare_digest(sent.encode(), expected.encode()):
        raise Problem(
            403, f"missing or wrong CSRF token: send the {CSRF_HEADER} header", error="CSRFError"
        )


async def require_page_login(request: Request) -> Principal | None:
    """For dashboard pages: the principal, or None when there is none (the page then
    redirects to ``/login?next=...``). A wrong credential counts as none here."""
    try:
        return await current_principal(request)
    except Problem:
        return None


READ = require(Scope.READ)
OPERATE = require(Scope.OPERATE)
ADMIN = require(Scope.ADMIN)
