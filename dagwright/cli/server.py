"""``dagwright server``: the HTTP API (``/api/v1``) and the dashboard, on uvicorn."""

from __future__ import annotations

from typing import Annotated

import typer

from dagwright.cli.options import ImportOption, settings_from
from dagwright.cli.output import stderr
from dagwright.errors import ConfigurationError
from dagwright.server.origins import is_loopback


def register(app: typer.Typer) -> None:
    app.command()(server)


def server(
    host: Annotated[
        str | None,
        typer.Option(
            "--host", help="Address to listen on (default: DAGWRIGHT_SERVER_HOST, 127.0.0.1)."
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port", "-p", min=1, max=65535, help="Port (default: DAGWRIGHT_SERVER_PORT, 8400)."
        ),
    ] = None,
    allow_anonymous: Annotated[
        bool,
        typer.Option(
            "--allow-anonymous",
            help="Let requests without a token act as admin (loopback addresses only).",
        ),
    ] = False,
    imports: ImportOption = None,
) -> None:
    """Serve the HTTP API under /api/v1 (OpenAPI at /api/v1/openapi.json) and the
    dashboard. Every request needs an API token (`dagwright token create`), sent as
    `Authorization: Bearer <token>` or as the password of HTTP Basic; Ctrl-C stops it."""
    settings = settings_from(imports, server_host=host, server_port=port)
    check_anonymous(settings.server_host, allow_anonymous)
    from dagwright.server.running import serve  # fastapi and uvicorn: only here

    stderr.print(
        f"dagwright server at http://{url_host(settings.server_host)}:{settings.server_port}"
        f"/ (API: /api/v1, OpenAPI: /api/v1/openapi.json)"
        + (" · [bold yellow]anonymous access on[/]" if allow_anonymous else "")
        + "; Ctrl-C stops it",
        soft_wrap=True,
    )
    serve(settings, allow_anonymous=allow_anonymous)


def check_anonymous(host: str, allow_anonymous: bool) -> None:
    """Anonymous access only on a loopback address: anyone else who can reach the port
    would be admin."""
    if allow_anonymous and not is_loopback(host):
        raise ConfigurationError(
            f"--allow-anonymous is refused on {host}: anyone who can reach it would be admin; "
            "bind to 127.0.0.1, or drop --allow-anonymous and use tokens"
        )


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
