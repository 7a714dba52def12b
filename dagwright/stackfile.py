"""The record of a running local stack (``dagwright up``, or ``dagwright run`` without a
broker), so every other command on the machine finds it with no configuration.

The file holds the embedded Valkey's URL (a unix socket in the same 0700 directory); it is
created 0600 all the same, since a configured URL may carry a password.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

STACK_FILE_NAME = "stack.json"


@dataclass(frozen=True)
class StackRecord:
    redis_url: str  # empty while the stack starts
    pid: int  # the process that owns the stack: `dagwright up`, or the host of `run`s
    owner: str  # "up" or "run"
    state: str = "ready"  # "starting" until Valkey and the worker run
    valkey_pid: int = 0  # recorded so that a next start can reclaim orphans
    worker_pid: int = 0
    imports: tuple[str, ...] = ()  # the modules the stack's worker imports (--import)
    log: str = ""  # where the stack's worker logs, if not to a terminal
    note: str = ""  # what its start had to clean up, for the command that asked for it
    server_pid: int = 0  # `up`'s HTTP API and dashboard (dagwright server), if any
    server_url: str = ""  # its URL on 127.0.0.1, empty until it answers


def stack_file(data_dir: Path) -> Path:
    return data_dir / STACK_FILE_NAME


def write_stack(data_dir: Path, record: StackRecord) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    path = stack_file(data_dir)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(asdict(record), fh)
    tmp.replace(path)


def read_stack(data_dir: Path) -> StackRecord | None:
    """The running stack, or None if there is none (or its process is gone, or it has not
    finished starting)."""
    record = read_stack_record(data_dir)
    if record is None or record.state != "ready":
        return None
    return record if process_alive(record.pid) else None


def read_stack_record(data_dir: Path) -> StackRecord | None:
    """The stack file as it is, whether its processes live or not."""
    try:
        fields = json.loads(stack_file(data_dir).read_text())
        fields["imports"] = tuple(fields.get("imports", ()))
        return StackRecord(**fields)
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def remove_stack(data_dir: Path, pid: int) -> None:
    """Remove the record if it is ours (another stack may have replaced it)."""
    record = read_stack_record(data_dir)
    if record is None or record.pid == pid or not process_alive(record.pid):
        stack_file(data_dir).unlink(missing_ok=True)


def process_alive(pid: int) -> bool:
    """Whether a process of this pid runs (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
