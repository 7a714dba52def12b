"""``dagwright server``: the HTTP API (``/api/v1``) and the dashboard, on uvicorn; and
``dagwright dashboard``: a one-time login link to the local stack's."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

import typer

from dagwright.cli.options import ImportOption, settings_from
from dagwright.cli.output import stderr, stdout
from dagwright.errors import ConfigurationError
from dagwright.server.local_access import login_url, read_token, token_file
from dagwright.server.origins import is_loopback
from dagwright.stackfile import read_stack


def register(app: typer.Typer) -> None:
    app.command()(server)
    app.command()(dashboard)


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
    local_access: Annotated[
        bool,
        typer.Option(
            "--local-access",
            help="Let your own user in without making a token (loopback addresses only): "
            "an admin token in <data dir>/server-<port>.token, readable by you alone, "
            "revoked when the server stops; `dagwright dashboard` prints a login link.",
        ),
    ] = False,
    imports: ImportOption = None,
) -> None:
    """Serve the HTTP API under /api/v1 (OpenAPI at /api/v1/openapi.json) and the
    dashboard. Every request needs an API token (`dagwright token create`), sent as
    `Authorization: Bearer <token>` or as the password of HTTP Basic; Ctrl-C stops it."""
    settings = settings_from(imports, server_host=host, server_port=port)
    check_local_access(settings.server.host, local_access)
    from dagwright.server.running import serve  # fastapi and uvicorn: only here

    where = f"{url_host(settings.server.host)}:{settings.server.port}"
    stderr.print(
        f"dagwright server at http://{where}/ (API: /api/v1); Ctrl-C stops it", markup=False
    )
    if local_access:  # a line of its own: a path is long, and one copies it whole
        token = token_file(settings.process.data_dir, settings.server.port)
        stderr.print(f"API token (yours alone): {token}", soft_wrap=True, markup=False)
    serve(settings, local_access=local_access)


def check_local_access(host: str, local_access: bool) -> None:
    """Local access only on a loopback address: its login links travel in clear http."""
    if local_access and not is_loopback(host):
        raise ConfigurationError(
            f"--local-access is refused on {host}: it is for this machine's user; "
            "bind to 127.0.0.1, or drop --local-access and use tokens"
        )


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def dashboard(imports: ImportOption = None) -> None:
    """Print a one-time login link to the dashboard of the local stack (`dagwright up`'s):
    opening it logs your browser in; once used, it opens nothing more."""
    settings = settings_from(imports)
    record = read_stack(settings.process.data_dir)
    if record is None or not record.server_url:
        raise ConfigurationError(
            f"no local stack with a dashboard runs for {settings.process.data_dir}: start one with "
            "`dagwright up`"
        )
    port = urlsplit(record.server_url).port or 0
    token = read_token(settings.process.data_dir, port)
    if token is None:
        raise ConfigurationError(
            f"{token_file(settings.process.data_dir, port)} is missing or unreadable: restart "
            "`dagwright up`, or log in with a token of `dagwright token create`"
        )
    stdout.print(login_url(record.server_url, token), markup=False)
