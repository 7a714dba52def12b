"""A run's events as Server-Sent Events, resumable with ``Last-Event-ID``.

Each event: ``id:`` its Redis stream id, ``event:`` its kind (``node.succeeded``...),
``data:`` its JSON as ``dagwright events --json`` prints it. A reconnecting browser sends
``Last-Event-ID`` and the stream goes on after it: no event twice, none missed (the
stream id orders them). Once the run has ended and every event was sent, ``event: end``
and the stream closes; ``?follow=false`` sends what exists, then ``end``.

The reads are the client's bounded ones (``Client.follow_events``), one wait at a time
in a thread of the streams' own pool (``server_max_event_streams``): between two, a
keep-alive comment goes out when the stream has been quiet, and a client that left ends
the loop (no thread keeps reading for nobody). An error once the stream has begun (the
run expired, Redis went away) is sent as ``event: error`` with its line, then it ends.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated

from anyio import CapacityLimiter, to_thread
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse

from dagwright.client.following import EventFollower
from dagwright.errors import DagwrightError, error_line
from dagwright.json_views import event_json
from dagwright.models import Event
from dagwright.server.auth import READ, client_of
from dagwright.server.blocking import in_thread

router = APIRouter(tags=["runs"])

STREAM_ID = r"^(\d+(-\d+)?|\$)$"  # an event's id (`1795857930788-1`), or `$`: from now on
STEP_WAIT_S = 1.0  # longest block of one read: how soon a departed client is noticed


def sse_event(event: Event) -> str:
    data = json.dumps(event_json(event), default=str)
    return f"id: {event.id}\nevent: {event.kind}\ndata: {data}\n\n"


END = "event: end\ndata: {}\n\n"


@router.get(
    "/runs/{run_id}/events",
    dependencies=[Depends(READ)],
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def run_events(
    run_id: str,
    request: Request,
    follow: bool = True,
    after: Annotated[str | None, Query(max_length=64, pattern=STREAM_ID)] = None,
    last_event_id: Annotated[str | None, Header(max_length=64, pattern=STREAM_ID)] = None,
) -> StreamingResponse:
    """The run's events (text/event-stream), after ``Last-Event-ID`` (or ``?after=``)."""
    client = client_of(request)
    await in_thread(client.get_run, run_id)  # 404 now, not in the middle of a stream
    follower = client.follow_events(run_id, after=last_event_id or after or "0")
    keepalive_s = client.settings.server_keepalive_s
    reads = stream_reads(request)
    return StreamingResponse(
        stream(follower, request, reads, follow=follow, keepalive_s=keepalive_s),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def stream_reads(request: Request) -> CapacityLimiter:
    """The threads event streams block in, apart from the pool every other call uses:
    open streams never leave a submit waiting for a thread (made on first use: a
    limiter belongs to the running event loop)."""
    state = request.app.state
    if getattr(state, "stream_reads", None) is None:
        state.stream_reads = CapacityLimiter(client_of(request).settings.server_max_event_streams)
    limiter: CapacityLimiter = state.stream_reads
    return limiter


async def stream(
    follower: EventFollower,
    request: Request,
    reads: CapacityLimiter,
    *,
    follow: bool,
    keepalive_s: float,
) -> AsyncIterator[str]:
    """The events as SSE; an error past the first byte (the run expired, Redis went away)
    ends the stream with an ``error`` event carrying its line: the status is sent."""
    try:
        async for chunk in sse_chunks(follower, request, reads, follow, keepalive_s):
            yield chunk
    except DagwrightError as exc:
        yield f"event: error\ndata: {json.dumps({'detail': error_line(exc)})}\n\n"


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
