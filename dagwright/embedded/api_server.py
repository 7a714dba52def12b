"""The HTTP API and dashboard of ``dagwright up``: ``dagwright server`` as a child process.

It listens on 127.0.0.1 only, whatever DAGWRIGHT_SERVER_HOST says, with local access
(``--local-access``): it makes an admin token that only this user can read, in the data
directory, and takes one-time login links made with it (``server/local_access.py``);
every request without a credential is refused, since a loopback port is open to every
user of the machine. Like Valkey and the worker it dies with ``up`` (children.py) and is
recorded in the stack file for the next start to reclaim.

A port in use (DAGWRIGHT_SERVER_PORT, 8400 by default) is not an error: the next free
one of the following few is taken and the URL printed says which, so a second ``up``
of another data directory, or a ``dagwright server`` already running, does not stop the
stack from starting. Rejected: refusing to start (a stack without its queue is worse
than a dashboard on another port).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from dagwright.embedded.children import spawn_owned, stack_env, stop_gracefully
from dagwright.embedded.valkey import EmbeddedStackError
from dagwright.errors import ConfigurationError

LOOPBACK = "127.0.0.1"
PORTS_TRIED = 20  # the configured port and the next ones
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 5.0  # open event streams would hold a graceful stop: killed after this
HEALTH_PATH = "/api/v1/health"


@dataclass
class ApiServerProcess:
    """A started server: its process, URL (with a trailing slash) and port."""

    process: subprocess.Popen[bytes]
    url: str
    port: int

    def stop(self) -> None:
        stop_gracefully(self.process, STOP_TIMEOUT_S)


def port_is_free(port: int) -> bool:
    """Whether a server could listen on LOOPBACK:``port`` now (uvicorn binds with
    SO_REUSEADDR too, so a port left in TIME_WAIT counts as free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def free_ports(first: int) -> list[int]:
    """The ports to try, in order: ``first`` and the following ones that are free."""
    candidates = range(first, min(first + PORTS_TRIED, 65536))
    free = [port for port in candidates if port_is_free(port)]
    if not free:
        raise ConfigurationError(
            f"ports {first}-{candidates[-1]} on {LOOPBACK} are all in use: set "
            "DAGWRIGHT_SERVER_PORT to a free port for `dagwright up`'s server"
        )
    return free


def start_api_server(
    redis_url: str, imports: list[str], first_port: int, output: IO[bytes]
) -> ApiServerProcess:
    """Start the server on the first free port from ``first_port`` and wait until it
    answers; a port taken between the check and the bind is skipped."""
    for port in free_ports(first_port):
        process = spawn_server(redis_url, imports, port, output)
        url = f"http://{LOOPBACK}:{port}/"
        if wait_until_serving(process, url):
            return ApiServerProcess(process, url, port)
        if port_is_free(port):  # it did not die for want of its port
            break
    raise EmbeddedStackError(
        f"the server of `dagwright up` did not start; its log: {getattr(output, 'name', '?')}"
    )


def spawn_server(
    redis_url: str, imports: list[str], port: int, output: IO[bytes]
) -> subprocess.Popen[bytes]:
    env = stack_env(redis_url, imports)
    command = [sys.executable, "-m", "dagwright", "server", "--host", LOOPBACK]
    command += ["--port", str(port), "--local-access"]
    # SIGKILL if we die: it keeps no state, and open event streams would stall a
    # graceful stop with nobody left to wait for it.
    return spawn_owned(
        command, death_signal=signal.SIGKILL, env=env, output=output, own_session=True
    )


def wait_until_serving(process: subprocess.Popen[bytes], url: str) -> bool:
    """True once ``url``'s health answers; False if the process exits first."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        if answers_health(url):
            return True
        time.sleep(0.1)
    stop_gracefully(process, STOP_TIMEOUT_S)
    return False


def answers_health(url: str) -> bool:
    """Whether the health answers: 200, or 401 (it asks for a token; this process does
    not read the server's)."""
    # No proxy: an http_proxy of the environment must not be asked for a loopback URL.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url.rstrip("/") + HEALTH_PATH, timeout=2) as response:
            return bool(response.status == 200)
    except urllib.error.HTTPError as refused:
        return refused.code == 401
    except (urllib.error.URLError, OSError):
        return False


def server_log(data_dir: Path) -> Path:
    return data_dir / "logs" / "server.log"
