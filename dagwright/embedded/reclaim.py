"""Reclaiming what a dead stack left behind, before a new one starts.

Run by the new stack's owner while it holds the stack lock, so no live stack is touched:
the processes recorded in a stale stack file (where the kernel could not be asked to end
them with their parent, or an older dagwright left them), and a Valkey still answering on
the socket. A leftover socket file or stack file is simply replaced.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dagwright.embedded.children import kill_group
from dagwright.embedded.valkey import shut_down_server_on
from dagwright.stackfile import StackRecord, process_alive, read_stack_record, stack_file

WORKER_STOP_TIMEOUT_S = 20.0


def reclaim_stale_stack(data_dir: Path, socket_path: Path) -> str:
    """Stop the orphans of a dead stack; return one line saying what was stopped, or ""."""
    record = read_stack_record(data_dir)
    stopped: list[str] = []
    if record is not None:
        stopped += stop_recorded_orphans(record)
        stack_file(data_dir).unlink(missing_ok=True)
    if shut_down_server_on(socket_path) and "Valkey" not in " ".join(stopped):
        stopped.append("a Valkey on its socket")
    if not stopped:
        return ""
    owner = f"`dagwright {record.owner}` (pid {record.pid})" if record else "an earlier stack"
    return f"reclaimed the local stack of {owner}, which had died: stopped {', '.join(stopped)}"


def stop_recorded_orphans(record: StackRecord) -> list[str]:
    stopped = []
    if is_live(record.server_pid, "dagwright"):
        stop_orphan(record.server_pid, 5.0)
        stopped.append(f"its server (pid {record.server_pid})")
    if is_live(record.worker_pid, "dagwright"):
        # Its running nodes finish, or their leases expire and they are queued again.
        stop_orphan(record.worker_pid, WORKER_STOP_TIMEOUT_S)
        stopped.append(f"its worker (pid {record.worker_pid})")
    if is_live(record.valkey_pid, "valkey"):
        stop_orphan(record.valkey_pid, 10.0)
        stopped.append(f"its Valkey (pid {record.valkey_pid})")
    return stopped


def stop_orphan(pid: int, timeout_s: float) -> None:
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while is_live(pid, ""):
        if time.monotonic() > deadline:
            kill_group(pid)
            return
        time.sleep(0.05)


def is_live(pid: int, command_word: str) -> bool:
    """Whether ``pid`` runs (not a zombie) a command containing ``command_word``: a pid
    from a stale file may have been given to an unrelated process since."""
    if pid <= 0 or not process_alive(pid):
        return False
    command = command_line(pid)
    return command is not None and command_word in command


def command_line(pid: int) -> str | None:
    """The process's command line, None if it has gone (or is a zombie)."""
    proc = Path(f"/proc/{pid}")
    if sys.platform.startswith("linux") and proc.exists():
        try:
            if ") Z" in (proc / "stat").read_text():
                return None
            return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return None
    result = subprocess.run(
        ["ps", "-o", "stat=,command=", "-p", str(pid)],
        capture_output=True,
        text=True,
        check=False,
    )
    line = result.stdout.strip()
    return None if not line or line.startswith("Z") else line
