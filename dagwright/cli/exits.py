"""Exit codes, and how each error becomes one line on stderr."""

from __future__ import annotations

import enum
import signal

from dagwright.embedded import EmbeddedStackError
from dagwright.errors import (
    BrokerUnavailableError,
    DagwrightError,
    InputError,
    RunCancelledError,
    RunFailedError,
    RunNotFinishedError,
)


class ExitCode(enum.IntEnum):
    OK = 0
    RUN_FAILED = 1  # the run failed or was cancelled (also: an unexpected internal error)
    INPUT_ERROR = 2  # bad plan, bad flag, unknown run, missing configuration
    NOT_FINISHED = 3  # the run was still going when --timeout expired
    UNAVAILABLE = 4  # Redis/Valkey or the broker cannot be reached (or the embedded one start)
    INTERRUPTED = 130


def exit_code_for(exc: DagwrightError) -> ExitCode:
    if isinstance(exc, InputError):
        return ExitCode.INPUT_ERROR
    if isinstance(exc, BrokerUnavailableError | EmbeddedStackError):
        return ExitCode.UNAVAILABLE
    if isinstance(exc, RunNotFinishedError):
        return ExitCode.NOT_FINISHED
    if isinstance(exc, RunFailedError | RunCancelledError):
        return ExitCode.RUN_FAILED
    return ExitCode.RUN_FAILED


def interrupt_on_sigterm() -> None:
    """SIGTERM stops a long-running command the way Ctrl-C does (KeyboardInterrupt), so
    its clean-up runs when a service manager or container runtime stops it."""
    signal.signal(signal.SIGTERM, _raise_interrupt)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
