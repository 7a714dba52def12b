"""Serving the app with uvicorn (what ``dagwright server`` runs)."""

from __future__ import annotations

import uvicorn

from dagwright.client import Client
from dagwright.server.app import create_app
from dagwright.server.local_access import open_local_access
from dagwright.settings import Settings


def serve(settings: Settings, *, local_access: bool = False) -> None:
    """Serve until interrupted (Ctrl-C, SIGTERM). With ``local_access``, the token of the
    server's user is made and written once the port is bound (a port in use leaves the
    token of the server on it alone), before the first answer; it is revoked at the end."""
    client = Client(settings)
    app = create_app(settings, client=client)
    config = uvicorn.Config(
        app,
        host=settings.server_host,
        port=settings.server_port,
        log_level="warning",
        # asyncio, never uvloop even where installed: under uvloop an event stream's
        # thread hop stalled (a finished read not handed back to the loop), seen in
        # tests/test_api_events.py; asyncio's hop costs a fraction of a millisecond more.
        loop="asyncio",
        proxy_headers=False,
        server_header=False,
    )
    listening = config.bind_socket()  # exits with uvicorn's one line if the port is taken
    access = (
        open_local_access(client, settings.data_dir, settings.server_port) if local_access else None
    )
    app.state.local_access = access
    try:
        uvicorn.Server(config).run(sockets=[listening])
    finally:
        if access is not None:
            access.close(client)
