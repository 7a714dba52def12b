"""``/mcp`` of ``dagwright server``: the MCP server over streamable HTTP, behind the API's
credentials.

Every request is authenticated before the SDK reads it, by the API's own rules
(``server/auth.py``: a Bearer token, or Basic with the token as password); one with no
credential, a wrong one, or only the dashboard's cookie is refused (401, problem+json,
the challenge of the API), and one with Basic sent by another site's page too (403, as
the API refuses such a change: a browser may send cached Basic credentials by itself).
The principal stays in the request's ASGI scope, where the tools read its scope
(``callers.py``): read lets a client follow and read, operate submit, cancel, decide and
replay. The body limit of the whole app
(``server_max_request_bytes``) holds here too, and the SDK is given the same.

Stateless: a request carries all the server needs (its credential, its protocol
version), and a run followed as an MCP task lives in Redis (the task id is the run's
id), so any instance behind a load balancer answers any request. The SDK's DNS-rebinding
check (Host/Origin allow-list) is off: it guards servers with no credential; here a
page that rebinds a name to this server still has no token to send.

Rejected: the SDK's own ``RequireAuthMiddleware`` with a ``TokenVerifier`` (OAuth's
shape: a second reading of our tokens, and its errors are not the API's problems); a
cookie login (a page of another site could ride the browser's cookie).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request

from dagwright.client import Client
from dagwright.mcp_server.building import build_mcp_server
from dagwright.server.auth import current_principal, refuse_other_sites, unauthorized
from dagwright.server.problems import Problem, problem_response

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.types import Receive, Scope, Send

MCP_PATH = "/mcp"
TOKEN_REQUIRED = "authentication required: send an API token (dagwright token create) as Bearer"


class McpEndpoint:
    """The ASGI app at ``/mcp``: authenticate, then hand the request to the SDK."""

    def __init__(self, client: Client) -> None:
        server = build_mcp_server(client)
        server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            max_request_body_size=client.settings.server.max_request_bytes,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.sessions: StreamableHTTPSessionManager = server.session_manager

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The SDK's request handling, for the app's lifetime (its lifespan enters it)."""
        async with self.sessions.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = await self.refusal(Request(scope, receive))
        if refusal is not None:
            await answer(refusal, scope, receive, send)
            return
        await self.sessions.handle_request(scope, receive, send)

    async def refusal(self, request: Request) -> Problem | None:
        """Why the request may not in (a problem to answer), or None if it may."""
        try:
            principal = await current_principal(request)
        except Problem as problem:
            return problem
        if principal is None or principal.via == "session":
            return unauthorized(TOKEN_REQUIRED)
        if principal.via != "bearer":  # Basic: a browser may have it cached, and send it
            try:
                refuse_other_sites(request)
            except Problem as problem:
                return problem
        return None


async def answer(problem: Problem, scope: Scope, receive: Receive, send: Send) -> None:
    response = problem_response(problem.status, problem.detail, problem.error)
    response.headers.update(problem.headers)
    await response(scope, receive, send)
