"""Who an MCP request acts for, and whether they may.

Over HTTP (``/mcp`` of ``dagwright server``) the endpoint has authenticated the request
before the SDK sees it (``http.py``, with ``server/auth.py``'s rules) and left the
principal in the request's ASGI scope; a tool reads it from there. Over stdio the caller
is the user who started ``dagwright mcp``: the process runs with their settings and
their Redis password, so it may do whatever their CLI may (admin), as the CLI does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from dagwright.client.tokens import Scope

PRINCIPAL_SCOPE_KEY = "dw_principal"  # where server/auth.py caches a request's principal


@dataclass(frozen=True)
class Caller:
    """A request's principal: a token's name and scope, or the local user over stdio."""

    name: str
    scope: Scope


LOCAL_USER = Caller(name="local user (stdio)", scope=Scope.ADMIN)


def caller_of(request: Any) -> Caller:
    """The caller of a request (the SDK's ``request_context.request``: a Starlette
    request over HTTP, None over stdio)."""
    if request is None:
        return LOCAL_USER
    principal = request.scope.get(PRINCIPAL_SCOPE_KEY)
    if principal is None:  # http.py lets no such request in: refuse rather than guess
        raise ToolError("authentication required: send an API token (dagwright token create)")
    return Caller(name=principal.name, scope=principal.scope)


def require(ctx: Context, scope: Scope) -> Caller:
    """The caller of the tool call ``ctx``, if it holds ``scope``; a tool error (with the
    API's 403 line) if not."""
    caller = caller_of(ctx.request_context.request)
    if not caller.scope.allows(scope):
        raise ToolError(f"this needs the {scope.value} scope; your token has {caller.scope.value}")
    return caller
