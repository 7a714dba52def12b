"""A run's events as Server-Sent Events, resumable with ``Last-Event-ID``.

Each event: ``id:`` its Redis stream id, ``event:`` its kind (``node.succeeded``...),
``data:`` its JSON as ``dagwright events --json`` prints it. A reconnecting browser sends
``Last-Event-ID`` and the stream goes on after it: no event twice, none missed (the
stream id orders them). Once the run has ended and every event was sent, ``event: end``
and the stream closes; ``?follow=false`` sends what exists, then ``end``.

The reads are the client's bounded ones (``Client.follow_events``), one wait at a time,
over the streams' own Redis pool and in their own threads (server/stream_slots.py: at most
``server_max_event_streams`` open, ``server_max_event_streams_per_token`` for a token; one
more is refused with Retry-After). Between two reads, a keep-alive comment goes out when
the stream has been quiet, and a client that left ends the loop (no thread keeps reading
for nobody). An error once the stream has begun (the run expired, Redis went away) is
sent as ``event: error`` with its public line, then it ends.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import TYPE_CHECKING, Annotated

from anyio import CapacityLimiter, to_thread
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse

from dagwright.client.following import EventFollower
from dagwright.errors import DagwrightError, error_line, public_line, status_of
from dagwright.json_views import event_json
from dagwright.models import Event
from dagwright.server.auth import READ, Principal, client_of
from dagwright.server.blocking import in_thread
from dagwright.server.openapi import problem_responses
from dagwright.server.stream_slots import EventStreams

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

log = logging.getLogger(__name__)

router = APIRouter(tags=["runs"])

# An event's id (`1795857930788-1`), or `$`: from now on. 19 digits a part at most, so
# every id that matches is one Redis takes (64 bits a part): a stream that aborted after
# its 200 would be reconnected to by an EventSource forever.
STREAM_ID = r"^(\d{1,19}(-\d{1,19})?|\$)$"
STEP_WAIT_S = 1.0  # longest block of one read: how soon a departed client is noticed


def sse_event(event: Event) -> str:
    data = json.dumps(event_json(event), default=str)
    return f"id: {event.id}\nevent: {event.kind}\ndata: {data}\n\n"


END = "event: end\ndata: {}\n\n"
SSE_EVENT_SCHEMA = {
    "type": "object",
    "required": ["data"],
    "properties": {
        "id": {"type": "string", "description": "The event's id (a Redis stream id)."},
        "event": {"type": "string", "description": "Its kind; `end` and `error` close."},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}


@router.get(
    "/runs/{run_id}/events",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "The run's events, then `event: end` (or `event: error`).",
            "content": {"text/event-stream": {"itemSchema": SSE_EVENT_SCHEMA}},
        },
        **problem_responses(404, 422, 429),
    },
)
async def run_events(
    run_id: str,
    request: Request,
    principal: Annotated[Principal, Depends(READ)],
    follow: bool = True,
    after: Annotated[str | None, Query(max_length=64, pattern=STREAM_ID)] = None,
    last_event_id: Annotated[str | None, Header(max_length=64, pattern=STREAM_ID)] = None,
) -> StreamingResponse:
    """The run's events (text/event-stream), after ``Last-Event-ID`` (or ``?after=``).
    429 or 503, with Retry-After, when the token or the server has its limit of streams
    open."""
    client = client_of(request)
    await in_thread(client.get_run, run_id)  # 404 now, not in the middle of a stream
    streams = event_streams(request)
    follower = client.follow_events(
        run_id, after=last_event_id or after or "0", store=streams.store
    )
    keepalive_s = client.settings.server.keepalive_s
    holder = principal.token_id or principal.name
    streams.slots.take(holder)
    return EventStreamResponse(
        stream(follower, request, streams.reads, follow=follow, keepalive_s=keepalive_s),
        release=lambda: streams.slots.give_back(holder),
    )


def event_streams(request: Request) -> EventStreams:
    """The app's one EventStreams, made on first use (in the running event loop)."""
    state = request.app.state
    if getattr(state, "event_streams", None) is None:
        state.event_streams = EventStreams.for_client(client_of(request))
    streams: EventStreams = state.event_streams
    return streams


class EventStreamResponse(StreamingResponse):
    """An event stream that gives its slot back when it ends, however it ends (the run
    ended, the client left, an error): only then, when no read of it is under way."""

    def __init__(self, events: AsyncGenerator[str, None], *, release: Callable[[], None]) -> None:
        super().__init__(
            events,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self.events = events
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()
            await self.events.aclose()


async def stream(
    follower: EventFollower,
    request: Request,
    reads: CapacityLimiter,
    *,
    follow: bool,
    keepalive_s: float,
) -> AsyncGenerator[str, None]:
    """The events as SSE; an error past the first byte (the run expired, Redis went away)
    ends the stream with an ``error`` event carrying its line: the status is sent."""
    try:
        async for chunk in sse_chunks(follower, request, reads, follow, keepalive_s):
            yield chunk
    except DagwrightError as exc:
        if status_of(exc) >= 500:
            log.warning("event stream of %s: %s", request.url.path, error_line(exc))
        yield f"event: error\ndata: {json.dumps({'detail': public_line(exc)})}\n\n"


async def sse_chunks(
    follower: EventFollower,
    request: Request,
    reads: CapacityLimiter,
    follow: bool,
    keepalive_s: float,
) -> AsyncIterator[str]:
    quiet_since = time.monotonic()
    wait_s = min(STEP_WAIT_S, keepalive_s) if follow else None
    while not follower.finished:
        if await request.is_disconnected():
            return
        batch = await to_thread.run_sync(follower.step, wait_s, limiter=reads)
        for event in batch:
            yield sse_event(event)
        if batch:
            quiet_since = time.monotonic()
        elif not follow:
            break
        elif time.monotonic() - quiet_since >= keepalive_s:
            quiet_since = time.monotonic()
            yield ": keep-alive\n\n"
    yield END
