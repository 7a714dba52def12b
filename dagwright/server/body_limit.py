"""``BodyLimit``: request bodies over ``server_max_request_bytes`` refused (413) before
anything reads them.

It sits in front of the whole app (``create_app`` adds it), so it runs before routing,
before authentication and before any JSON is parsed: an unauthenticated 200 MB POST costs
the server a header, not 200 MB of memory (issue 30: such a POST took it to 668 MB before
its 401). Two checks, for the two ways HTTP/1.1 frames a body:

- a ``Content-Length`` over the limit is answered at once, the body never read (the
  connection is then closed, which tells the client to stop sending);
- a body without one (``Transfer-Encoding: chunked``, or a length that lies) is counted
  as it arrives: at the first byte past the limit the 413 goes out, and the app is told
  the client left, so it stops reading and whatever it answers is dropped.

Rejected: Starlette's form limits (forms only, after routing) and a check in each route
(after authentication, and FastAPI has read the body by then).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagwright.server.problems import problem_response

if TYPE_CHECKING:
    from starlette.responses import JSONResponse
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOO_LARGE = 413
NOT_A_LENGTH = 400


def too_large(max_bytes: int) -> str:
    return (
        f"the request body is over the server's limit of {max_bytes:,} bytes "
        "(DAGWRIGHT_SERVER_MAX_REQUEST_BYTES)"
    )


def refusal(status: int, detail: str, error: str) -> JSONResponse:
    """The problem answered for a body refused; the connection is closed after it, since
    the rest of the body is not read."""
    response = problem_response(status, detail, error)
    response.headers["Connection"] = "close"
    return response


def declared_length(scope: Scope) -> int | None:
    """The request's Content-Length (None if absent); -1 if it is not a number."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            return int(value) if value.isdigit() else -1
    return None


class BodyLimit:
    """Pure ASGI middleware: HTTP request bodies of at most ``max_bytes``."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = declared_length(scope)
        if length is not None and (length < 0 or length > self.max_bytes):
            await self.refuse(scope, receive, send, length)
            return
        await CountedBody(self, scope, receive, send).run()

    async def refuse(self, scope: Scope, receive: Receive, send: Send, length: int) -> None:
        if length < 0:
            response = refusal(NOT_A_LENGTH, "Content-Length is not a number", "BadRequest")
        else:
            response = refusal(TOO_LARGE, too_large(self.max_bytes), "ContentTooLarge")
        await response(scope, receive, send)


class CountedBody:
    """One request whose body is counted as the app reads it, cut at the limit."""

    def __init__(self, limit: BodyLimit, scope: Scope, receive: Receive, send: Send) -> None:
        self.limit = limit
        self.scope = scope
        self.receive = receive
        self.send = send
        self.received = 0
        self.refused = False
        self.response_started = False

    async def run(self) -> None:
        await self.limit.app(self.scope, self.counted_receive, self.guarded_send)

    async def counted_receive(self) -> Message:
        if self.refused:
            return {"type": "http.disconnect"}
        message = await self.receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit.max_bytes:
                await self.refuse_mid_body()
                return {"type": "http.disconnect"}
        return message

    async def refuse_mid_body(self) -> None:
        """Answer 413 now (unless the app has answered already), and drop the rest."""
        self.refused = True
        if self.response_started:
            return
        response = refusal(TOO_LARGE, too_large(self.limit.max_bytes), "ContentTooLarge")
        await response(self.scope, self.receive, self.send)

    async def guarded_send(self, message: Message) -> None:
        if self.refused:
            return  # the 413 went out: what the app answers to a cut body is dropped
        if message["type"] == "http.response.start":
            self.response_started = True
        await self.send(message)
