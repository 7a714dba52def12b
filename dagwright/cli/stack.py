"""Commands that run processes: worker, beat, reconciler, up."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlsplit

import typer
from rich.markup import escape

from dagwright.cli.exits import interrupt_on_sigterm
from dagwright.cli.options import ImportOption, settings_from
from dagwright.cli.output import print_warning, stderr
from dagwright.connection import redact_url, require_redis_url
from dagwright.embedded import EmbeddedStack, EmbeddedStackError
from dagwright.errors import ConfigurationError
from dagwright.keys import ORCHESTRATOR_QUEUE
from dagwright.server.local_access import login_url, read_token, token_file
from dagwright.settings import Settings

if TYPE_CHECKING:
    from dagwright.workers import WorkerRegistry

# Celery (dagwright.tasks) and prometheus_client are imported by the commands that run
# them, so that every other command starts without them.

RESTART_BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)


def register(app: typer.Typer) -> None:
    app.command()(worker)
    app.command()(beat)
    app.command()(reconciler)
    app.command()(up)


def worker(
    worker_types: Annotated[
        list[str] | None,
        typer.Option(
            "--type",
            "-t",
            help="Serve only this worker type's queue (repeatable; `orchestrator` is the "
            "planner's queue; `function:<queue>` the queue of the functions declared with "
            "@dagwright.function(queue=...); default: every queue).",
        ),
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", "-c", min=1, help="Processes (default: CPUs).")
    ] = None,
    pool: Annotated[str, typer.Option(help="Celery pool: prefork, threads or solo.")] = "prefork",
    loglevel: Annotated[str, typer.Option("--loglevel", "-l")] = "INFO",
    reconciler: Annotated[
        bool,
        typer.Option(
            "--reconciler/--no-reconciler",
            help="Also run the reconciler (one is active at a time).",
        ),
    ] = True,
    hostname: Annotated[
        str | None, typer.Option("--hostname", "-n", help="Celery node name.")
    ] = None,
    with_beat: Annotated[
        bool, typer.Option("--beat", help="Also run beat, which fires the schedules.")
    ] = False,
    imports: ImportOption = None,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            help="No banner, and no warning for running as root (the embedded "
            "stack's worker: JSON only, on a private socket).",
        ),
    ] = False,
) -> None:
    """Run a worker for some or all worker types, each on its own queue (`dw.<type>`)."""
    from dagwright.metrics.server import bind_metrics_server
    from dagwright.registry import build_registry
    from dagwright.tasks import queues_for, run_worker

    settings = settings_from(imports)
    registry = build_registry(settings)
    queues = queues_for(worker_types, registry)
    warn_of_models(settings, registry)
    if ORCHESTRATOR_QUEUE not in queues:  # goals and schedules need one somewhere
        stderr.print(
            f"[dim]this worker does not serve {ORCHESTRATOR_QUEUE} (goal planning, "
            "schedules): run one with `--type orchestrator`, or with no --type[/]"
        )
    # Bound here, so a port in use is one line before the worker starts; served once
    # its pool has started (tasks/steps.py MetricsStep).
    endpoint = bind_metrics_server(settings) if settings.telemetry.metrics_port else None
    try:
        code = run_worker(
            settings,
            queues=queues,
            concurrency=concurrency,
            pool=pool,
            loglevel=loglevel.upper(),
            reconciler=reconciler,
            hostname=hostname,
            beat=with_beat,
            metrics_endpoint=endpoint,
            quiet=quiet,
        )
    finally:
        if endpoint is not None:
            endpoint.stop()
    raise typer.Exit(code)


def warn_of_models(settings: Settings, registry: WorkerRegistry) -> None:
    """One line per model the worker may call that is near or past its end of life (a
    node on a retired one fails at once, naming the replacement: llm/model_lifecycle)."""
    from dagwright.llm.model_lifecycle import end_of_life_lines
    from dagwright.plans.priced_models import models_of_types

    models = {
        settings.llm.default_model,
        settings.planner.model or settings.llm.default_model,
        *models_of_types(registry.types(include_internal=True), settings).values(),
    }
    for line in end_of_life_lines(models, settings):
        print_warning(line)


def beat(
    loglevel: Annotated[str, typer.Option("--loglevel", "-l")] = "INFO",
    imports: ImportOption = None,
) -> None:
    """Run the scheduler that fires the schedules. Start two for failover: one fires,
    the other takes over within DAGWRIGHT_BEAT_LOCK_TIMEOUT_S if it dies."""
    from dagwright.tasks import run_beat

    settings = settings_from(imports)
    raise typer.Exit(run_beat(settings, loglevel=loglevel.upper()))


def reconciler(
    loglevel: Annotated[str, typer.Option("--loglevel", "-l")] = "INFO",
    imports: ImportOption = None,
) -> None:
    """Run only the reconciler, for deployments whose workers run with --no-reconciler:
    it re-queues nodes of dead workers and lost messages, and stops runs past their
    timeout. One is active at a time (a lock in Redis); start two for failover. SIGTERM
    or Ctrl-C stops it cleanly."""
    from dagwright.tasks.reconciler_service import run_reconciler

    settings = settings_from(imports)
    try:
        logging.getLogger("dagwright").setLevel(loglevel.upper())
    except ValueError:
        raise ConfigurationError(
            f"unknown log level {loglevel!r}: use DEBUG, INFO or WARNING"
        ) from None
    url = require_redis_url(settings)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    stderr.print(
        f"reconciler on {redact_url(url)}, "
        f"a pass every {settings.dispatch.reconcile_interval_s:g}s "
        "(one reconciler is active at a time); Ctrl-C stops it",
        soft_wrap=True,
    )
    run_reconciler(settings, stop=stop)
    stderr.print("reconciler stopped")
    raise typer.Exit(0)


def up(
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", "-c", min=1, help="Worker processes (default: CPUs)."),
    ] = None,
    loglevel: Annotated[
        str | None,
        typer.Option("--loglevel", "-l", help="The worker's log level (default: WARNING)."),
    ] = None,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Celery's banner and warnings, and a line per task (INFO)."
        ),
    ] = False,
    server: Annotated[
        bool,
        typer.Option(
            "--server/--no-server",
            help="Also serve the HTTP API and dashboard on 127.0.0.1 (port: "
            "DAGWRIGHT_SERVER_PORT, or the next free one), with a token for you alone and "
            "a one-time login link.",
        ),
    ] = True,
    imports: ImportOption = None,
) -> None:
    """Run the local stack in the foreground until Ctrl-C: an embedded Valkey, a worker
    for every queue (reconciler included), and the HTTP API and dashboard on 127.0.0.1.
    Other dagwright commands on this machine find it by themselves. Its processes end with
    it, even if it is killed or its terminal closes."""
    settings = settings_from(imports)
    if settings.redis.url:
        raise ConfigurationError(
            "DAGWRIGHT_REDIS_URL is set: `dagwright up` runs its own embedded Valkey; unset it, "
            "or run `dagwright worker` against that Redis instead"
        )
    interrupt_on_sigterm()
    signal.signal(signal.SIGHUP, signal.getsignal(signal.SIGTERM))  # its terminal closed
    level = (loglevel or ("INFO" if verbose else "WARNING")).upper()
    with EmbeddedStack(
        settings,
        owner="up",
        concurrency=concurrency,
        loglevel=level,
        beat=True,
        server=server,
        verbose=verbose,
    ) as stack:
        try:
            announce(stack, settings)
            supervise(stack)
        except KeyboardInterrupt:
            stderr.print("stopping: running nodes finish first (Ctrl-C again to force)")
    raise typer.Exit(0)


def announce(stack: EmbeddedStack, settings: Settings) -> None:
    from dagwright.registry import build_registry
    from dagwright.tasks import queues_for

    if stack.note:
        stderr.print(f"[yellow]{escape(stack.note)}[/]", soft_wrap=True)
    queues = queues_for(None, build_registry(settings))
    stderr.print(
        f"[green]dagwright is up[/]: Valkey at {stack.redis_url} "
        f"(data in {settings.process.data_dir}), workers for {', '.join(queues)} "
        f"({worker_processes(stack.concurrency, settings)}), "
        "beat for the schedules. "
        "Ctrl-C stops it.",
        soft_wrap=True,
    )
    if stack.server_url:
        for line in server_lines(stack.server_url, settings):
            stderr.print(line, soft_wrap=True, markup=False)


def worker_processes(concurrency: int | None, settings: Settings) -> str:
    """How many nodes `up` runs at once, and how to change it: a run whose nodes outnumber
    them queues, and one process per CPU is not what a person guesses."""
    if concurrency:
        return f"{concurrency} worker processes: --concurrency"
    if settings.process.worker_concurrency:
        return (
            f"{settings.process.worker_concurrency} worker processes: DAGWRIGHT_WORKER_CONCURRENCY"
        )
    cpus = os.cpu_count() or 1
    return f"{cpus} worker processes, one per CPU: `dagwright up --concurrency N` for more"


def server_lines(url: str, settings: Settings) -> list[str]:
    """The server's ready lines: its URL (and why it is not the configured port), a
    one-time login link alone on its line (under 80 columns, to click or copy whole), and
    where the API token of this user is."""
    port = urlsplit(url).port or 0
    moved = (
        ""
        if port == settings.server.port
        else (f" (port {settings.server.port} was in use: DAGWRIGHT_SERVER_PORT sets another)")
    )
    lines = [f"dashboard and API at {url}{moved}"]  # the API's document: api/v1/openapi.json
    token = read_token(settings.process.data_dir, port)
    if token is not None:
        lines += [
            "log in with this one-time link (`dagwright dashboard` prints another):",
            f"  {login_url(url, token)}",
            f"API token (yours alone): {token_file(settings.process.data_dir, port)}",
        ]
    return lines


def supervise(stack: EmbeddedStack) -> None:
    """Restart the worker if it dies, with a growing delay; never returns on its own."""
    restarts = 0
    while True:
        time.sleep(0.5)
        code = stack.worker_exit_code()
        if code is None:
            continue
        delay = RESTART_BACKOFF_S[min(restarts, len(RESTART_BACKOFF_S) - 1)]
        stderr.print(f"[yellow]the worker exited with code {code}; restarting in {delay:g}s[/]")
        time.sleep(delay)
        stack.start_worker()
        restarts += 1


__all__ = ["EmbeddedStackError", "up", "worker"]
