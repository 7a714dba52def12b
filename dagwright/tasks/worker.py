"""Starting a worker: one Celery worker consuming the queues of the chosen worker types."""

from __future__ import annotations

import logging
import os
import socket
import warnings

from celery.exceptions import SecurityWarning

from dagwright.errors import ConfigurationError
from dagwright.keys import FUNCTION_QUEUE_TYPE_PREFIX, ORCHESTRATOR_QUEUE, ORCHESTRATOR_TYPE
from dagwright.settings import Settings
from dagwright.shown_ids import shown_id
from dagwright.tasks.app_factory import build_app
from dagwright.tasks.log_ids import tag_logs_once_set_up
from dagwright.tasks.log_redaction import redact_logs_once_set_up
from dagwright.tasks.steps import Endpoint, MetricsStep, PresenceStep, ReconcilerStep
from dagwright.workers import WorkerRegistry


def queues_for(worker_types: list[str] | None, registry: WorkerRegistry) -> list[str]:
    """The queues a worker serves: all of them by default (the orchestrator queue, one
    per worker type and one per function queue), else exactly those named, ``orchestrator``
    naming the planner's queue and ``function:<queue>`` the queue of the functions declared
    with ``queue=<queue>``. A deployment runs one orchestrator service and one service per
    worker type, each scaled on its own queue, so naming a type must not add the
    orchestrator queue."""
    served = registry.served_queues()
    if not worker_types:
        return [ORCHESTRATOR_QUEUE, *served.values()]
    unknown = sorted(set(worker_types) - {ORCHESTRATOR_TYPE, *served})
    if unknown:
        raise ConfigurationError(
            f"unknown worker type(s) {', '.join(unknown)}; registered: "
            f"{', '.join(served)} (and {ORCHESTRATOR_TYPE}, for the planner's queue; "
            f"`{FUNCTION_QUEUE_TYPE_PREFIX}<queue>` for the functions declared with "
            "@dagwright.function(queue=...) in the --import modules)"
        )
    chosen = dict.fromkeys(worker_types)  # the order given, without repeats
    return [ORCHESTRATOR_QUEUE if name == ORCHESTRATOR_TYPE else served[name] for name in chosen]


def run_worker(
    settings: Settings,
    *,
    queues: list[str],
    concurrency: int | None = None,
    pool: str = "prefork",
    loglevel: str = "INFO",
    reconciler: bool = True,
    hostname: str | None = None,
    beat: bool = False,
    metrics_endpoint: Endpoint | None = None,
    quiet: bool = False,
) -> int:
    """Run a worker in the foreground until it is stopped; returns its exit code.
    ``metrics_endpoint``: a bound metrics server, served while the worker runs.
    ``quiet``: no banner, and no warning for running as root: the embedded stack's
    worker, whose messages are JSON only and whose broker is a socket of this user."""
    if quiet:
        warnings.filterwarnings("ignore", category=SecurityWarning)
    app = build_app(settings)
    app.steps["worker"].add(MetricsStep)
    app.steps["consumer"].add(PresenceStep)
    if reconciler:
        app.steps["consumer"].add(ReconcilerStep)
    redact_logs_once_set_up(settings)  # before the worker: it sets up its logging at once
    tag_logs_once_set_up()
    worker = app.Worker(
        queues=queues,
        concurrency=concurrency or settings.process.worker_concurrency or os.cpu_count() or 1,
        pool=pool,
        loglevel=loglevel,
        hostname=hostname or f"dagwright.{os.getpid()}@{socket.gethostname()}",
        optimization="fair",
        without_mingle=True,
        without_gossip=True,
        beat=beat,
        scheduler="dagwright.tasks.beat:DagwrightScheduler",
        metrics_endpoint=metrics_endpoint,
        quiet=quiet,
    )
    logging.getLogger("celery.worker.control").addFilter(drop_no_backend_revoke_warnings)
    for logger in CELERY_TASK_LOGGERS:
        logging.getLogger(logger).addFilter(cut_task_ids)
    worker.start()
    return int(worker.exitcode or 0)


# Where Celery logs a task by name and id: "Task <name>[<id>] received" (strategy), then
# "... succeeded in 0.01s" or "... raised ..." (trace).
CELERY_TASK_LOGGERS = ("celery.worker.strategy", "celery.app.trace")


def cut_task_ids(record: logging.LogRecord) -> bool:
    """Cuts the task id and name in Celery's task log lines (as ``shown_id`` does): a
    message from outside the house may carry any, and Celery would echo a 1 MB id whole."""
    if isinstance(record.args, dict):
        record.args = {
            key: shown_id(value) if key in ("id", "name") and isinstance(value, str) else value
            for key, value in record.args.items()
        }
    return True


def drop_no_backend_revoke_warnings(record: logging.LogRecord) -> bool:
    """Celery's revoke also marks each id revoked in the result backend, and warns for each
    when there is none, as here (outputs live in the run state): a cancel would log one
    warning per queued node."""
    return not str(record.msg).startswith("Failed to mark task %s as revoked in backend")
