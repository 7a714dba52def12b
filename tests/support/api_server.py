"""``dagwright server`` in a background thread of the test process, over real HTTP.

``ApiServer.start(settings)`` binds uvicorn to a free loopback port and waits until it
answers; ``stop()`` asks it to exit (``should_exit``) and joins the thread. ``token`` makes
an API token of a scope with the real client, as ``dagwright token create`` does. With
``local_access``, the server makes its user's token and file as ``dagwright up``'s does
(in ``settings.process.data_dir``).
Shared by the API's and the dashboard's tests.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
import uvicorn

from dagwright.client import Client
from dagwright.server.app import create_app
from dagwright.server.local_access import LocalAccess, open_local_access
from dagwright.settings import Settings
from tests.support.waiting import wait_until


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class ApiServer:
    """A running server: its ``url`` (no trailing slash) and the ``client`` it serves."""

    url: str
    client: Client
    server: uvicorn.Server
    thread: threading.Thread
    tokens: dict[str, str] = field(default_factory=dict)
    local_access: LocalAccess | None = None

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @classmethod
    def start(cls, settings: Settings, *, local_access: bool = False) -> ApiServer:
        client = Client(settings)
        port = free_port()
        access = (
            open_local_access(client, settings.process.data_dir, port) if local_access else None
        )
        app = create_app(settings, local_access=access, client=client)
        # As `dagwright server` runs it (server/running.py): asyncio, and no proxy headers
        # from uvicorn (the app believes them only from server_trusted_proxies).
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            loop="asyncio",
            proxy_headers=False,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, name=f"api-server-{port}", daemon=True)
        thread.start()
        wait_until(lambda: server.started, timeout=15, what="the API server to start")
        return cls(f"http://127.0.0.1:{port}", client, server, thread, local_access=access)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        if self.local_access is not None:
            self.local_access.close(self.client)

    def token(self, scope: str = "admin", name: str | None = None) -> str:
        """A new API token of ``scope`` (one per scope and name, made once)."""
        key = f"{scope}:{name or scope}"
        if key not in self.tokens:
            self.tokens[key] = self.client.tokens.create(name or f"test-{scope}", scope=scope).token
        return self.tokens[key]

    def http(self, scope: str | None = "admin", **options: object) -> httpx.Client:
        """An HTTP client on the server, with a Bearer token of ``scope`` (None: none)."""
        headers = {"Authorization": f"Bearer {self.token(scope)}"} if scope else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **options)  # type: ignore[arg-type]


@contextmanager
def running_server(settings: Settings, *, local_access: bool = False) -> Iterator[ApiServer]:
    server = ApiServer.start(settings, local_access=local_access)
    try:
        yield server
    finally:
        server.stop()
