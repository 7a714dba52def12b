"""Who is visiting the dashboard: the one place the pages meet the API's authentication.

PROVISIONAL until the API's auth is merged: the calls below follow API_CONTRACT.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request


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
    raise NotImplementedError


async def open_session(request: Request, token: str) -> tuple[str, int]:
    raise NotImplementedError


async def close_session(request: Request, visitor: Visitor) -> None:
    raise NotImplementedError


def session_cookie() -> str:
    return "dw_session"
