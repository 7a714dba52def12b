"""Leases: which commands are using a shared embedded stack right now.

Each ``dagwright run`` that uses the stack (without ``up``) holds an exclusive ``flock``
on a file of its own in ``leases/``; the stack stops when none is held. The kernel
releases a lock when its process ends however it ends, so a crashed or ``kill -9``-ed
command's lease expires at once, and a reused pid cannot keep one alive.

``attach.lock`` makes "count the leases, then stop" and "find the stack, then take a
lease" exclusive, so a command never takes a lease on a stack that is already stopping.
"""

from __future__ import annotations

import fcntl
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

LEASES_DIR = "leases"
ATTACH_LOCK = "attach.lock"
STACK_LOCK = "stack.lock"  # held by the stack's owner for as long as it lives


class Lease:
    """A held lease; ``release`` (or the end of the process) gives it back."""

    def __init__(self, data_dir: Path) -> None:
        folder = data_dir / LEASES_DIR
        folder.mkdir(mode=0o700, exist_ok=True)
        self.path = folder / f"{os.getpid()}-{secrets.token_hex(4)}.lease"
        self._file: IO[str] | None = open(self.path, "w")  # noqa: SIM115 (held open)
        fcntl.flock(self._file, fcntl.LOCK_EX)

    def release(self) -> None:
        if self._file is not None:
            self.path.unlink(missing_ok=True)
            self._file.close()
            self._file = None


def live_leases(data_dir: Path, *, remove_expired: bool = True) -> int:
    """How many leases are held; expired ones are removed on the way."""
    live = 0
    for path in sorted((data_dir / LEASES_DIR).glob("*.lease")):
        if is_locked(path):
            live += 1
        elif remove_expired:
            path.unlink(missing_ok=True)
    return live


def is_locked(path: Path) -> bool:
    """Whether some process holds ``path``'s lock (taking it for a moment if not)."""
    try:
        with open(path) as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False
    except FileNotFoundError:
        return False


def stack_owner_alive(data_dir: Path) -> bool:
    """Whether a stack's owner runs (it holds the stack lock for its whole life)."""
    return is_locked(data_dir / STACK_LOCK)


@contextmanager
def attach_lock(data_dir: Path) -> Iterator[None]:
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(data_dir / ATTACH_LOCK, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield
