"""``dagwright metrics-server``: the deployment's Prometheus metrics over HTTP."""

from __future__ import annotations

import signal
from typing import Annotated

import typer

from dagwright.cli.exits import interrupt_on_sigterm
from dagwright.cli.options import ImportOption, settings_from
from dagwright.cli.output import stderr
from dagwright.metrics import DEFAULT_PORT


def register(app: typer.Typer) -> None:
    app.command("metrics-server")(metrics_server)


def metrics_server(
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            "-p",
            min=1,
            max=65535,
            help=f"Port to listen on (default: DAGWRIGHT_METRICS_PORT, else {DEFAULT_PORT}).",
            show_default=False,
        ),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(
            "--host", help="Address to listen on (default: DAGWRIGHT_METRICS_HOST, 0.0.0.0)."
        ),
    ] = None,
    imports: ImportOption = None,
) -> None:
    """Serve the deployment's Prometheus metrics at /metrics until Ctrl-C: runs by status,
    node durations, queue depths, LLM calls, tokens and cost, breakers, dead letters,
    sandbox executions and live workers, all read from Redis at each scrape. Workers
    serve the same metrics when DAGWRIGHT_METRICS_PORT is set."""
    settings = settings_from(imports)
    from dagwright.metrics.server import bind_metrics_server  # prometheus_client

    server = bind_metrics_server(settings, host=host, port=port)
    interrupt_on_sigterm()
    server.start()
    stderr.print(f"serving metrics at {server.url} (Ctrl-C stops)")
    try:
        while True:
            signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    raise typer.Exit(0)
