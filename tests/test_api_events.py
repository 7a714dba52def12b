"""A run's events over Server-Sent Events: resumed after a dropped connection with
Last-Event-ID, with no event twice and none missed, ended by ``event: end``."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import redis

from dagwright.settings import Settings
from tests.support.api_server import ApiServer, running_server
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("worker")


@dataclass(frozen=True)
class SentEvent:
    id: str
    kind: str
    data: dict[str, Any]


def sse_events(response: httpx.Response) -> Iterator[SentEvent]:
    """The events of an SSE response as they arrive (comments skipped)."""
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if line.startswith(":"):
            continue
        if line:
            name, _, value = line.partition(": ")
            fields[name] = value
        elif fields:
            yield SentEvent(fields.get("id", ""), fields["event"], json.loads(fields["data"]))
            fields = {}


def chain(length: int, seconds: float) -> dict[str, Any]:
    nodes = [
        {
            "id": f"n{i}",
            "type": "function",
            "function": "count",
            "params": {"seconds": seconds},
            "depends_on": [f"n{i - 1}"] if i else [],
        }
        for i in range(length)
    ]
    return {"nodes": nodes}


def test_the_stream_resumes_after_a_dropped_connection_without_gaps_or_repeats(
    api: ApiServer,
) -> None:
    run_id = api.client.submit(chain(4, 0.3)).run_id
    with api.http("read") as http:
        path = f"/api/v1/runs/{run_id}/events"
        first: list[SentEvent] = []
        with http.stream("GET", path) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            for event in sse_events(response):
                first.append(event)
                if event.kind == "node.succeeded":
                    break  # the connection drops mid-run
        headers = {"Last-Event-ID": first[-1].id}
        with http.stream("GET", path, headers=headers) as response:
            rest = list(sse_events(response))
    assert rest[-1].kind == "end"
    sent = first + rest[:-1]
    stored = list(api.client.events(run_id, follow=False))
    assert [event.id for event in sent] == [event.id for event in stored]
    assert len({event.id for event in sent}) == len(sent)
    assert sent[-1].kind == "run.succeeded"
    assert sent[0].data["run_id"] == run_id and sent[0].data["kind"] == sent[0].kind


def test_follow_false_sends_what_exists_then_end(api: ApiServer) -> None:
    run_id = api.client.submit(chain(2, 0)).run_id
    api.client.wait(run_id, timeout=30)
    stored = list(api.client.events(run_id, follow=False))
    with api.http("read") as http:
        after = stored[1].id
        response = http.get(f"/api/v1/runs/{run_id}/events", params={"follow": "false"})
        resumed = http.get(
            f"/api/v1/runs/{run_id}/events", params={"follow": "false", "after": after}
        )
    events = list(sse_events(response))
    assert [e.id for e in events[:-1]] == [e.id for e in stored] and events[-1].kind == "end"
    assert [e.id for e in sse_events(resumed)][:-1] == [e.id for e in stored[2:]]


@pytest.mark.parametrize("where", ["after", "Last-Event-ID"])
def test_an_event_id_past_64_bits_is_a_422_not_a_stream_that_aborts(
    api: ApiServer, where: str
) -> None:
    run_id = api.client.submit(chain(1, 0)).run_id
    too_big = f"{2**64}-0"
    asked = {"params": {"after": too_big}} if where == "after" else {}
    headers = {"Last-Event-ID": too_big} if where != "after" else {}
    with api.http("read") as http:
        response = http.get(f"/api/v1/runs/{run_id}/events", headers=headers, **asked)
        assert response.status_code == 422, response.text
        assert "should match pattern" in response.json()["detail"]
        largest = f"{10**19 - 1}-{10**19 - 1}"  # the largest id the API takes: an empty stream
        fine = http.get(
            f"/api/v1/runs/{run_id}/events", params={"follow": "false", "after": largest}
        )
    assert [event.kind for event in sse_events(fine)] == ["end"]


GATED: dict[str, Any] = {
    "nodes": [{"id": "gate", "type": "function", "function": "concat", "approval": "required"}]
}


def blocked_event_reads(client: redis.Redis) -> int:
    """Connections blocked in XREAD on the state database right now."""
    return sum(
        1 for entry in client.client_list() if entry["cmd"] == "xread" and "b" in entry["flags"]
    )


def test_a_quiet_stream_keeps_alive_and_stops_reading_once_the_client_has_gone(
    settings: Settings, redis_client: redis.Redis
) -> None:
    quick = settings.model_copy(update={"server_keepalive_s": 0.2})
    with running_server(quick) as server:
        run_id = server.client.submit(GATED).run_id
        wait_until(lambda: server.client.approvals.list(run_id), what="the gate to wait")
        before = blocked_event_reads(redis_client)
        path = f"/api/v1/runs/{run_id}/events"
        with server.http("read") as http, http.stream("GET", path) as response:
            assert ": keep-alive" in itertools.islice(response.iter_lines(), 200)
            wait_until(lambda: blocked_event_reads(redis_client) > before, what="a blocked read")
        wait_until(
            lambda: blocked_event_reads(redis_client) <= before,
            timeout=5,
            what="the stream's reads to stop after the client left",
        )
        server.client.cancel(run_id)
