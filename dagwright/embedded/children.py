"""Child processes that cannot outlive the process that started them.

On Linux each child asks the kernel for a signal when its parent dies
(``PR_SET_PDEATHSIG``), set between fork and exec, so even a ``kill -9`` of ``dagwright
up`` (or a closed terminal) takes Valkey and the worker with it. Elsewhere the stack file
records their pids and the next start reclaims them (reclaim.py).

Rejected: a watchdog thread in the parent (it dies with the parent it watches) and the
parent's process group (a SIGKILL of the parent signals nobody).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO

PR_SET_PDEATHSIG = 1


def die_with_parent(signum: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the child receive ``signum`` when its parent dies (None
    where the kernel offers no such thing)."""
    if not sys.platform.startswith("linux"):
        return None
    parent = os.getpid()
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

    def preexec() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request was made
            os.kill(os.getpid(), signum)

    return preexec


def stack_env(redis_url: str, imports: list[str]) -> dict[str, str]:
    """The environment of a stack's child (its worker, its server): this one, pointed at
    the stack's Valkey (which is its broker too), importing the stack's modules."""
    env = {**os.environ, "DAGWRIGHT_REDIS_URL": redis_url}
    env.pop("DAGWRIGHT_BROKER_URL", None)
    if imports:
        env["DAGWRIGHT_IMPORTS"] = ",".join(imports)
    return env


def spawn_owned(
    command: list[str],
    *,
    death_signal: int,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    output: IO[bytes] | None = None,
    own_session: bool = False,
) -> subprocess.Popen[bytes]:
    """Start ``command`` as a child that receives ``death_signal`` if this process dies.
    ``own_session``: its own process group, so that a stop reaches its children too and a
    Ctrl-C in our terminal does not (we stop it in order instead)."""
    return subprocess.Popen(
        command,
        env=env,
        cwd=cwd,
        stdout=output,
        stderr=subprocess.STDOUT if output is not None else None,
        start_new_session=own_session,
        preexec_fn=die_with_parent(death_signal),
    )


def stop_gracefully(process: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM to the process alone (it stops its own children in order; signalling its
    group would kill a Celery pool under its feet, and each child would be logged as a
    WorkerLostError), then SIGKILL to its whole group after ``timeout_s``."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(process.pid)
        process.wait()


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
