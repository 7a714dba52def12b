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
        proxy_headers=False,
        server_header=False,
    )
    uvicorn.Server(config).run()
