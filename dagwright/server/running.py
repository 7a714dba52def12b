"""Serving the app with uvicorn (what ``dagwright server`` runs)."""

from __future__ import annotations

import socket

import uvicorn

from dagwright.client import Client
from dagwright.errors import ConfigurationError
from dagwright.server.app import create_app
from dagwright.server.local_access import open_local_access
from dagwright.settings import Settings


def serve(settings: Settings, *, local_access: bool = False) -> None:
    """Serve until interrupted (Ctrl-C, SIGTERM). With ``local_access``, the token of the
    server's user is made and written once the port is bound (a port in use leaves the
    token of the server on it alone), before the first answer; the app revokes it when
    it stops."""
    client = Client(settings)
    listening = bind(settings.server.host, settings.server.port)
    access = (
        open_local_access(client, settings.process.data_dir, settings.server.port)
        if local_access
        else None
    )
    app = create_app(settings, local_access=access, client=client)
    config = uvicorn.Config(
        app,
        log_level="warning",
        # asyncio, never uvloop even where installed: under uvloop an event stream's
        # thread hop stalled (a finished read not handed back to the loop), seen in
        # tests/test_api_events.py; asyncio's hop costs a fraction of a millisecond more.
        loop="asyncio",
        proxy_headers=False,
        server_header=False,
    )
    uvicorn.Server(config).run(sockets=[listening])


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (uvicorn listens on it), or one line saying
    why not."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not 0: asyncio turns Nagle off (TCP_NODELAY) only on sockets whose
    # proto says TCP, and an accepted socket inherits this one's. With proto 0 each answer's
    # body waited for the client's delayed ACK of its headers: +40 ms on every request.
    listening = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((host.strip("[]"), port))
    except OSError as error:
        listening.close()
        raise ConfigurationError(
            f"cannot listen on {host}:{port} ({error.strerror}): set --port or "
            "DAGWRIGHT_SERVER_PORT to a free port"
        ) from None
    return listening
