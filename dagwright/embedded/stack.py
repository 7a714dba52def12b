"""The owner's side of the embedded stack: Valkey plus a worker for every queue.

``dagwright up`` owns one in the foreground; for ``dagwright run`` the stack host
(host.py) owns one for as long as some run holds a lease on it. Either way the stack is
recorded in the stack file, so every other command on the machine finds it, and the owner
holds the stack lock for its whole life, so a second owner waits or is refused.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import IO

from dagwright.embedded.api_server import ApiServerProcess, server_log, start_api_server
from dagwright.embedded.children import spawn_owned, stack_env, stop_gracefully
from dagwright.embedded.leases import STACK_LOCK
from dagwright.embedded.reclaim import reclaim_stale_stack
from dagwright.embedded.valkey import EmbeddedStackError, socket_path_in, start_valkey
from dagwright.errors import ConfigurationError
from dagwright.settings import Settings
from dagwright.stackfile import StackRecord, remove_stack, write_stack

log = logging.getLogger(__name__)

WORKER_STOP_TIMEOUT_S = 20.0
VALKEY_STOP_TIMEOUT_S = 10.0


class EmbeddedStack:
    """Valkey + one worker process, started and stopped together."""

    def __init__(
        self,
        settings: Settings,
        *,
        owner: str,
        concurrency: int | None = None,
        worker_log: Path | None = None,
        loglevel: str = "WARNING",
        beat: bool = False,
        server: bool = False,
        verbose: bool = False,
        wait_for_lock_s: float = 0.0,
        shown_log: Path | None = None,
    ) -> None:
        self.settings = settings
        self.beat = beat  # the worker also runs beat, which fires the schedules
        self.serve_api = server  # also the HTTP API and dashboard (api_server.py)
        self.owner = owner
        self.concurrency = concurrency
        self.worker_log = worker_log  # None: the worker writes to our own stdout/stderr
        self.loglevel = loglevel
        self.verbose = verbose  # Celery's banner and warnings too
        self.wait_for_lock_s = wait_for_lock_s  # a stopping stack may still hold the lock
        self.data_dir = settings.process.data_dir
        self._lock_file: IO[str] | None = None
        self._valkey: subprocess.Popen[bytes] | None = None
        self._worker: subprocess.Popen[bytes] | None = None
        self._worker_log_fh: IO[bytes] | None = None
        self._server: ApiServerProcess | None = None
        self._server_log_fh: IO[bytes] | None = None
        self.redis_url = ""
        self.note = ""  # what starting had to reclaim, one line
        self._record = StackRecord(
            redis_url="",
            pid=os.getpid(),
            owner=owner,
            state="starting",
            imports=tuple(settings.process.imports),
            log=str(worker_log or shown_log or ""),  # shown_log: our own output's file
        )

    def __enter__(self) -> EmbeddedStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> str:
        """Start Valkey and the worker; return the Redis URL."""
        self._take_lock()
        try:
            data = self.data_dir / "valkey"
            data.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(self.data_dir, 0o700)
            socket_path = socket_path_in(data)
            self.note = reclaim_stale_stack(self.data_dir, socket_path)
            self._record_as(note=self.note)
            self._valkey = start_valkey(data, socket_path)
            self.redis_url = f"unix://{socket_path}?db=0"
            self._record_as(valkey_pid=self._valkey.pid)
            self.start_worker()
            if self.serve_api:
                self.start_server()
            self._record_as(redis_url=self.redis_url, state="ready")
        except BaseException:
            self.stop()
            raise
        return self.redis_url

    def _record_as(self, **changes: object) -> None:
        self._record = replace(self._record, **changes)  # type: ignore[arg-type]
        write_stack(self.data_dir, self._record)

    def _take_lock(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock_file = open(self.data_dir / STACK_LOCK, "w")  # noqa: SIM115 (held open)
        deadline = time.monotonic() + self.wait_for_lock_s
        while True:
            try:
                fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.1)
        self._lock_file.close()
        self._lock_file = None
        raise ConfigurationError(
            f"a local stack is already running from {self.data_dir} "
            "(another `dagwright up` or `dagwright run`); use it, or stop it first"
        )

    def start_worker(self) -> None:
        """Start (or restart) the worker process for every queue, reconciler included."""
        env = stack_env(self.redis_url, list(self.settings.process.imports))
        command = [sys.executable, "-m", "dagwright", "worker", "--loglevel", self.loglevel]
        if self.concurrency:
            command += ["--concurrency", str(self.concurrency)]
        if self.beat:
            command.append("--beat")
        if not self.verbose:
            command.append("--quiet")
        if self.worker_log is not None and self._worker_log_fh is None:
            self.worker_log.parent.mkdir(parents=True, exist_ok=True)
            self._worker_log_fh = open(self.worker_log, "ab")  # noqa: SIM115
        # SIGKILL if we die: a warm shutdown could hang on a Valkey dying at the same
        # moment; its running nodes' leases expire and they are queued again.
        self._worker = spawn_owned(
            command,
            death_signal=signal.SIGKILL,
            env=env,
            output=self._worker_log_fh,
            own_session=True,
        )
        self._record_as(worker_pid=self._worker.pid)

    def start_server(self) -> None:
        """Start the HTTP API and dashboard on 127.0.0.1 (its output: logs/server.log)."""
        log_path = server_log(self.data_dir)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._server_log_fh = open(log_path, "ab")  # noqa: SIM115 (the child writes to it)
        self._server = start_api_server(
            self.redis_url,
            self.settings.process.imports,
            self.settings.server.port,
            self._server_log_fh,
        )
        self._record_as(server_pid=self._server.process.pid, server_url=self._server.url)

    @property
    def server_url(self) -> str:
        """The server's URL (trailing slash), "" if this stack runs none."""
        return self._server.url if self._server else ""

    def worker_exit_code(self) -> int | None:
        """None while the worker runs; its exit code once it has stopped."""
        return self._worker.poll() if self._worker else None

    def describe_worker_death(self) -> str:
        where = f"; its log: {self.worker_log}" if self.worker_log else ""
        return f"the embedded worker exited with code {self.worker_exit_code()}{where}"

    def stop(self) -> None:
        """Stop the worker (warm: running nodes finish), then Valkey, then let go."""
        if self._lock_file is not None:
            # Gone from the file first: nothing finds a stack that is stopping.
            remove_stack(self.data_dir, os.getpid())
        server, self._server = self._server, None
        if server is not None:  # first: nothing is submitted to a stack that is stopping
            server.stop()
        if self._server_log_fh is not None:
            self._server_log_fh.close()
            self._server_log_fh = None
        worker, self._worker = self._worker, None
        if worker is not None:
            stop_gracefully(worker, WORKER_STOP_TIMEOUT_S)
        if self._worker_log_fh is not None:
            self._worker_log_fh.close()
            self._worker_log_fh = None
        valkey, self._valkey = self._valkey, None
        if valkey is not None:
            stop_gracefully(valkey, VALKEY_STOP_TIMEOUT_S)
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None


__all__ = ["EmbeddedStack", "EmbeddedStackError"]
