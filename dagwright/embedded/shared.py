"""The user's side of the embedded stack: a ``dagwright run`` with no Redis configured.

It takes a lease (leases.py), then uses the running local stack (``up``'s, or the host of
other runs) or starts a host for one (host.py), and gives the lease back at its end; the
last run to do so waits for the stack to have stopped, so nothing is left running.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dagwright.embedded.leases import Lease, attach_lock, live_leases, stack_owner_alive
from dagwright.embedded.valkey import EmbeddedStackError
from dagwright.errors import ConfigurationError
from dagwright.settings import Settings
from dagwright.stackfile import StackRecord, process_alive, read_stack_record

HOST_START_TIMEOUT_S = 90.0  # the host may first wait for a stopping stack to have gone
STACK_READY_TIMEOUT_S = 120.0
# How long a run on a stack started for it waits for the worker to announce itself (its
# presence, written as it starts consuming: tasks/steps.py) before submitting; past it,
# the run is submitted all the same.
WORKER_ANNOUNCE_TIMEOUT_S = 15.0
WORKER_ANNOUNCE_QUIET_S = 2.0  # a wait longer than this is said
STACK_STOP_TIMEOUT_S = 60.0  # a warm worker shutdown, then Valkey's


@dataclass
class SharedStack:
    """A stack this command holds a lease on."""

    data_dir: Path
    record: StackRecord
    started_here: bool

    @property
    def redis_url(self) -> str:
        return self.record.redis_url

    def check_alive(self) -> None:
        """Raise if the stack's owner has gone (its worker died, or `up` was stopped)."""
        if not stack_owner_alive(self.data_dir):
            where = f"; its log: {self.record.log}" if self.record.log else ""
            raise EmbeddedStackError(
                f"the local stack of `dagwright {self.record.owner}` stopped{where}"
            )


@contextmanager
def shared_stack(settings: Settings, *, say: Callable[[str], None]) -> Iterator[SharedStack]:
    """Hold a lease on the local stack, starting it if none runs. ``say``: one line for
    the person (what is started or used, and what had to be reclaimed)."""
    data_dir = settings.process.data_dir
    log_file = data_dir / "logs" / "worker.log"
    with attach_lock(data_dir):
        lease = Lease(data_dir)
        try:
            host = None if running_record(data_dir) else start_host(settings, log_file)
            if host is not None:  # recorded before another run may look for it
                wait_for_record(data_dir, host, log_file)
        except BaseException:
            lease.release()
            raise
    try:
        record = wait_until_ready(data_dir, host, log_file)
        shared = SharedStack(data_dir, record, started_here=host is not None)
        require_imports(record, settings.process.imports)
        if host is None:
            where = f"; dashboard at {record.server_url}" if record.server_url else ""
            say(f"using the local stack of `dagwright {record.owner}` (pid {record.pid}){where}")
        else:
            say(f"no Redis configured: started the embedded stack (worker log: {log_file})")
            if record.note:
                say(record.note)
            wait_for_worker(settings, record, say)
        yield shared
    finally:
        give_back(lease, data_dir)


def running_record(data_dir: Path) -> StackRecord | None:
    """The stack to use: one whose owner lives and which is not stopping (a stopping
    stack has left the stack file already)."""
    record = read_stack_record(data_dir)
    return record if record is not None and stack_owner_alive(data_dir) else None


def start_host(settings: Settings, log_file: Path) -> subprocess.Popen[bytes]:
    """Start the stack host in a session of its own: it must outlive this command if
    another run still uses the stack, and a Ctrl-C here must not reach it."""
    env = dict(os.environ)
    if settings.process.imports:
        env["DAGWRIGHT_IMPORTS"] = ",".join(settings.process.imports)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "dagwright.embedded.host"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_for_record(data_dir: Path, host: subprocess.Popen[bytes], log_file: Path) -> None:
    deadline = time.monotonic() + HOST_START_TIMEOUT_S
    while True:
        record = read_stack_record(data_dir)
        if record is not None and record.pid == host.pid:
            return
        if host.poll() is not None or time.monotonic() > deadline:
            raise EmbeddedStackError(f"the embedded stack did not start; its log: {log_file}")
        time.sleep(0.05)


def wait_until_ready(
    data_dir: Path, host: subprocess.Popen[bytes] | None, log_file: Path
) -> StackRecord:
    deadline = time.monotonic() + STACK_READY_TIMEOUT_S
    while True:
        record = read_stack_record(data_dir)
        ours = record is not None and (host is None or record.pid == host.pid)
        if ours and record is not None and record.state == "ready":
            return record
        gone = host.poll() is not None if host else not stack_owner_alive(data_dir)
        if gone or time.monotonic() > deadline:
            raise EmbeddedStackError(f"the embedded stack did not start; its log: {log_file}")
        time.sleep(0.1)


def wait_for_worker(
    settings: Settings, record: StackRecord, say: Callable[[str], None] = lambda line: None
) -> None:
    """Until the new stack's worker has announced itself (or died, or
    ``WORKER_ANNOUNCE_TIMEOUT_S`` passed): a submit then sees its pulling slots, so a run
    of many roots gets a message per slot and the rest pulled (decision 127), not a
    message a root. The run's first node waits for the worker anyway. Past
    ``WORKER_ANNOUNCE_QUIET_S`` (a slow start: heavy --import modules), ``say`` tells why."""
    import redis

    from dagwright.keys import Keys
    from dagwright.orchestrator.control.runnable import live_entries

    client = redis.Redis.from_url(record.redis_url, decode_responses=True)
    key = Keys(settings.redis.key_prefix).worker_capabilities
    started = time.monotonic()
    told = False
    try:
        while not live_entries(client.hgetall(key), time.time()):
            waited = time.monotonic() - started
            if waited > WORKER_ANNOUNCE_TIMEOUT_S or not process_alive(record.worker_pid):
                return  # a worker that died is told where the run waits (check_alive)
            if waited > WORKER_ANNOUNCE_QUIET_S and not told:
                say(f"waiting for its worker to start (at most {WORKER_ANNOUNCE_TIMEOUT_S:g} s)")
                told = True
            time.sleep(0.05)
    finally:
        client.close()


def require_imports(record: StackRecord, imports: list[str]) -> None:
    missing = [name for name in imports if name not in record.imports]
    if missing:
        raise ConfigurationError(
            f"the running local stack (`dagwright {record.owner}`, pid {record.pid}) does not "
            f"import {', '.join(missing)}: run this when it has stopped, or restart it with "
            f"{' '.join(f'--import {name}' for name in missing)}"
        )


def give_back(lease: Lease, data_dir: Path) -> None:
    """Release the lease; if it was the last, wait for the stack to have stopped."""
    with attach_lock(data_dir):
        lease.release()
        record = running_record(data_dir)
        last = record is not None and record.owner == "run" and not live_leases(data_dir)
    if not last:
        return
    deadline = time.monotonic() + STACK_STOP_TIMEOUT_S
    while stack_owner_alive(data_dir) and time.monotonic() < deadline:
        if live_leases(data_dir, remove_expired=False):
            return  # another run took the stack over
        time.sleep(0.1)
