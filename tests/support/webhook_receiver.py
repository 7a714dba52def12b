"""A loopback webhook receiver: answers 503 to its first ``down_for`` requests (a
receiver that is down), then 200, and keeps every request it got."""

from __future__ import annotations

from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler

from tests.support.loopback_http import LoopbackServer


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    answered: int


class WebhookReceiver(LoopbackServer):
    def __init__(self, down_for: int = 0) -> None:
        self.requests: list[Received] = []
        self._down_left = down_for
        super().__init__()

    def accepted(self, path: str) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if r.path == path and r.answered == 200]

    def to(self, path: str) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def _receive(self, path: str, headers: dict[str, str], body: bytes) -> int:
        with self._lock:
            answered = 200
            if self._down_left > 0:
                self._down_left -= 1
                answered = 503
            self.requests.append(Received(path, headers, body, answered))
            return answered

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                code = receiver._receive(self.path, dict(self.headers.items()), body)
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        return Handler
