"""``dagwright flower``: Celery's web monitor on the configured broker, behind a login."""

from __future__ import annotations

from typing import Annotated

import typer
from pydantic import SecretStr

from dagwright.cli.options import settings_from
from dagwright.cli.output import stderr
from dagwright.connection import redact_url, require_redis_url
from dagwright.errors import ConfigurationError, MissingExtraError

ALL_INTERFACES = ("", "0.0.0.0", "::")


def register(app: typer.Typer) -> None:
    app.command()(flower)


def flower(
    port: Annotated[
        int | None,
        typer.Option(
            "--port", "-p", min=1, max=65535, help="Port (default: DAGWRIGHT_FLOWER_PORT, 5555)."
        ),
    ] = None,
    address: Annotated[
        str, typer.Option("--address", "-a", help="Address to listen on (default: all).")
    ] = "0.0.0.0",
    url_prefix: Annotated[
        str,
        typer.Option("--url-prefix", help="Serve under this path, behind a reverse proxy."),
    ] = "",
    no_auth: Annotated[
        bool,
        typer.Option("--no-auth", help="Run with no login (anyone who can reach it can use it)."),
    ] = False,
) -> None:
    """Start Flower, Celery's web monitor, on the configured broker (or the running
    `dagwright up`): every node's task, its arguments reading `run=… node=… type=…
    fence=…` (search `run=<id>` to find a run's tasks). The login comes from
    DAGWRIGHT_FLOWER_BASIC_AUTH (`user:password`, comma-separated for several); without
    one it refuses to start unless told `--no-auth`."""
    try:  # first: without the extra, nothing else matters (one line says what to install)
        from dagwright.tasks.flower import run_flower  # Celery and Flower
    except ImportError as exc:
        raise MissingExtraError.of(exc, "dagwright flower") from None
    settings = settings_from(None)
    login = checked_login(settings.flower.basic_auth, no_auth)
    broker_url = settings.redis.broker_url or require_redis_url(settings)
    port = port or settings.flower.port
    stderr.print(
        f"starting Flower at {flower_url(address, port, url_prefix)} "
        f"on broker {redact_url(broker_url)}, "
        + (f"login: {', '.join(users_of(login))}" if login else "[bold red]no login[/]")
        + "; Ctrl-C stops it",
        soft_wrap=True,
    )
    code = run_flower(settings, port=port, address=address, url_prefix=url_prefix, basic_auth=login)
    raise typer.Exit(code)


def checked_login(secret: SecretStr | None, no_auth: bool) -> str | None:
    """The ``user:password[,user:password]`` Flower is to require; ConfigurationError if
    there is none (and --no-auth was not given) or it is malformed. The password is never
    part of a message."""
    if no_auth:
        return None
    if secret is None or not secret.get_secret_value().strip():
        raise ConfigurationError(
            "Flower needs a login: set DAGWRIGHT_FLOWER_BASIC_AUTH=user:password "
            "(comma-separated for several), or pass --no-auth to run it open"
        )
    login = secret.get_secret_value().strip()
    for entry in login.split(","):
        user, _, password = entry.partition(":")
        if not user.strip() or not password:
            raise ConfigurationError(
                "DAGWRIGHT_FLOWER_BASIC_AUTH must be user:password, comma-separated for several"
            )
    return login


def users_of(login: str) -> list[str]:
    return [entry.partition(":")[0] for entry in login.split(",")]


def flower_url(address: str, port: int, url_prefix: str) -> str:
    host = "localhost" if address in ALL_INTERFACES else address
    prefix = url_prefix.strip("/")
    return f"http://{host}:{port}/{prefix + '/' if prefix else ''}"
