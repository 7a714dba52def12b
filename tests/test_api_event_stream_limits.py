"""Event streams are bounded per token and in total, and read Redis over a pool of their
own: with every stream open, the rest of the API answers (issue 30: from about 100 open
streams, every request, whoami included, answered 503)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest

from dagwright.settings import Settings
from tests.support.api_server import ApiServer, running_server
from tests.support.waiting import wait_until

GATED: dict[str, Any] = {
    "nodes": [{"id": "gate", "type": "function", "function": "concat", "approval": "required"}]
}
QUICK_S = 2.0  # what "answers quickly" means here, on a loaded 2-core machine


def open_stream(server: ApiServer, token: str, run_id: str) -> tuple[socket.socket, bytes]:
    """An event stream over a raw socket (one thread holds a hundred): the socket and
    the answer's head (status line and headers); the socket is left open."""
    host, _, port = server.url.removeprefix("http://").partition(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(
        f"GET /api/v1/runs/{run_id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            break
        head += chunk
    return sock, head


def status_of(head: bytes) -> int:
    return int(head.split(b" ", 2)[1])


@contextmanager
def streams_open(
    server: ApiServer, tokens: list[str], run_id: str, each: int
) -> Iterator[list[socket.socket]]:
    """``each`` open streams of every token, closed on leaving."""
    with ExitStack() as stack:
        opened = []
        for token in tokens:
            for _ in range(each):
                sock, head = open_stream(server, token, run_id)
                stack.enter_context(sock)
                assert status_of(head) == 200, head
                opened.append(sock)
        yield opened


def read_tokens(server: ApiServer, count: int, prefix: str) -> list[str]:
    return [server.client.tokens.create(f"{prefix}{i}", scope="read").token for i in range(count)]


def gated_run(server: ApiServer) -> str:
    return server.client.submit(GATED).run_id


@pytest.mark.usefixtures("redis_client")
def test_with_every_stream_open_the_api_answers_and_one_more_is_refused(
    settings: Settings,
) -> None:
    total, per_token = 120, 20  # more streams than redis-py's pool has connections (100)
    many = settings.model_copy(
        update={
            "server_max_event_streams": total,
            "server_max_event_streams_per_token": per_token,
        }
    )
    with running_server(many) as server:
        run_id = gated_run(server)
        tokens = read_tokens(server, total // per_token, "watcher-")
        with streams_open(server, tokens, run_id, per_token), server.http("operate") as http:
            started = time.monotonic()
            whoami = http.get("/api/v1/whoami")
            assert whoami.status_code == 200, whoami.text
            assert time.monotonic() - started < QUICK_S
            submitted = http.post("/api/v1/runs", json={"plan": GATED})
            assert submitted.status_code == 201, submitted.text
            assert http.get(f"/api/v1/runs/{run_id}").status_code == 200

            extra, head = open_stream(server, server.token("read", "one-more"), run_id)
            with extra:
                assert status_of(head) == 503, head
                assert b"retry-after: " in head.lower()
                assert b"DAGWRIGHT_SERVER_MAX_EVENT_STREAMS" in head + extra.recv(4096)
        server.client.cancel(run_id)


@pytest.mark.usefixtures("redis_client")
def test_a_token_gets_its_share_of_streams_and_a_closed_one_is_given_back(
    settings: Settings,
) -> None:
    small = settings.model_copy(
        update={"server_max_event_streams": 5, "server_max_event_streams_per_token": 2}
    )
    with running_server(small) as server:
        run_id = gated_run(server)
        [mine, other] = read_tokens(server, 2, "viewer-")
        with streams_open(server, [mine], run_id, 2) as [first, _]:
            refused, head = open_stream(server, mine, run_id)
            with refused:
                assert status_of(head) == 429, head
                assert b"retry-after: " in head.lower()
            with streams_open(server, [other], run_id, 2):  # another token is not held up
                pass
            first.close()

            def reopened() -> bool:
                sock, head = open_stream(server, mine, run_id)
                sock.close()
                return status_of(head) == 200

            wait_until(reopened, timeout=10, what="the closed stream's slot to be given back")
        server.client.cancel(run_id)
