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
    redis_url: str
    pid: int
    owner: str  # "up" or "run"


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
    """The running stack, or None if there is none (or its process is gone)."""
    try:
        record = StackRecord(**json.loads(stack_file(data_dir).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return record if process_alive(record.pid) else None


def remove_stack(data_dir: Path, pid: int) -> None:
    """Remove the record if it is ours (another stack may have replaced it)."""
    record = read_stack(data_dir)
    if record is None or record.pid == pid:
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
