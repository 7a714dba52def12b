"""Serving the app with uvicorn (what ``dagwright server`` runs)."""

from __future__ import annotations

import uvicorn

from dagwright.server.app import create_app
from dagwright.settings import Settings


def serve(settings: Settings, *, allow_anonymous: bool = False) -> None:
    """Serve until interrupted (Ctrl-C, SIGTERM)."""
    app = create_app(settings, allow_anonymous=allow_anonymous)
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
    uvicorn.Server(config).run()
