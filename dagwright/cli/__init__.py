"""The ``dagwright`` command: thin commands over the Python client.

Exit codes: 0 ok, 1 the run failed or was cancelled, 2 input or usage error, 3 still
running when --timeout expired, 4 Redis/broker unreachable, 130 interrupted. Errors are
one line on stderr, never a traceback (set DAGWRIGHT_DEBUG=1 to see one).
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import warnings
from typing import Any

import typer

from dagwright.cli import (
    approvals,
    catalog,
    dlq,
    doctor,
    evals,
    flower,
    logs,
    mcp_serving,
    memory,
    metrics,
    planning,
    runs,
    sandbox,
    schedules,
    scores,
    server,
    skills,
    stack,
    tokens,
    traces,
    watch,
    webhooks,
)
from dagwright.cli.exits import ExitCode, exit_code_for
from dagwright.cli.output import print_error, print_warning
from dagwright.errors import DagwrightError, ModelEndOfLifeWarning, error_line
from dagwright.redaction import RedactingFormatter

app = typer.Typer(
    name="dagwright",
    help="Run dependency DAGs of tasks and LLM agents on Celery workers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's plain help: option names whole at 80 columns (rich's panels cut them), and
    # as wide as a wider terminal up to 120
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120},
)


def print_version(wanted: bool) -> None:
    if wanted:
        from importlib.metadata import version

        typer.echo(f"dagwright {version('dagwright')}")
        raise typer.Exit(0)


@app.callback()
def options(
    show_version: bool = typer.Option(
        False, "--version", callback=print_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """Run dependency DAGs of tasks and LLM agents on Celery workers."""


runs.register(app)
stack.register(app)
catalog.register(app)
planning.register(app)
dlq.register(app)
evals.register(app)
doctor.register(app)
schedules.register(app)
memory.register(app)
skills.register(app)
approvals.register(app)
watch.register(app)
logs.register(app)
flower.register(app)
traces.register(app)
metrics.register(app)
server.register(app)
tokens.register(app)
webhooks.register(app)
scores.register(app)
sandbox.register(app)
mcp_serving.register(app)


class OneLineFormatter(logging.Formatter):
    """Log records as one line each: an exception is summarised, not printed in full."""

    def formatException(self, ei: Any) -> str:
        return ""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record).rstrip()
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            line += f" ({type(exc).__name__}: {exc})"
        return line


def configure_logging(debug: bool) -> None:
    handler = logging.StreamHandler()
    fmt = "%(levelname)s %(name)s: %(message)s"
    # Redacted by pattern (a key, a URL's password): the settings, and so the secret
    # values themselves, are not loaded yet; the worker's logs also mask those.
    inner = logging.Formatter(fmt) if debug else OneLineFormatter(fmt)
    handler.setFormatter(RedactingFormatter(inner, ()))
    logging.basicConfig(level=os.environ.get("DAGWRIGHT_LOGLEVEL", "WARNING"), handlers=[handler])


def show_model_warnings() -> None:
    """A model near its end of life as one line on stderr (``warning: ...``), each time a
    command meets it; other warnings as Python shows them."""
    shown = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], *args: Any, **kw: Any) -> None:
        if issubclass(category, ModelEndOfLifeWarning):
            print_warning(str(message))
        else:
            shown(message, category, *args, **kw)

    warnings.showwarning = show
    warnings.simplefilter("always", ModelEndOfLifeWarning)


def main() -> None:
    debug = bool(os.environ.get("DAGWRIGHT_DEBUG"))
    configure_logging(debug)
    show_model_warnings()
    # Ctrl-C must stop the command even when started with SIGINT ignored (a background
    # job of a non-interactive shell), where Python would install no handler of its own.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        app()
    except DagwrightError as exc:
        if debug:
            raise
        print_error(error_line(exc))
        sys.exit(exit_code_for(exc))
    except KeyboardInterrupt:
        print_error("interrupted")
        sys.exit(ExitCode.INTERRUPTED)
    except Exception as exc:
        if debug:
            raise
        print_error(
            f"internal error: {type(exc).__name__}: {exc} (set DAGWRIGHT_DEBUG=1 for the traceback)"
        )
        sys.exit(ExitCode.RUN_FAILED)
    finally:
        # The process ends here: CPython's last garbage collection would walk every object
        # the imports made (~35 ms of a 0.3 s `dagwright status`) to free memory the OS
        # frees anyway. Frozen objects are skipped; atexit handlers and flushes still run.
        gc.freeze()
