"""A private RabbitMQ node for the tests (Debian's ``rabbitmq-server``), started by them.

One node per test session (per pytest-xdist worker), in a temporary directory of its
own: its own Erlang port mapper (``epmd`` on a free port, stopped with the node), its
own cookie (``HOME`` is that directory, mode 0700), a user with a random password (the
node listens on loopback, where another local user could connect), and one virtual host
per use, so that the in-process worker of one test never takes the messages of
another's worker subprocesses. Everything is declared by a definitions file read at
boot: no ``rabbitmqctl`` call (each costs an Erlang VM start, a second or two).

The package's ``/usr/sbin`` wrapper would switch to the ``rabbitmq`` user (whose files
the node would then need); the script it wraps runs the node as whoever calls it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

from tests.support.valkey import free_port

SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")  # Debian's rabbitmq-server package
EPMD = "epmd"
START_TIMEOUT_S = 120.0  # ~4 s on an idle machine, 12 s seen beside 7 other suites
STOP_TIMEOUT_S = 30.0
USER = "dagwright-test"
# The virtual hosts the fixtures use: the in-process worker's, the worker subprocesses'.
VHOSTS = ("inprocess", "subprocess")


def rabbitmq_missing() -> str | None:
    """Why no node can be started here (None: it can)."""
    if not SERVER.exists():
        return f"{SERVER} is absent: `apt-get install rabbitmq-server` (Debian)"
    if shutil.which(EPMD) is None:
        return "epmd (Erlang's port mapper, a dependency of rabbitmq-server) is absent"
    return None


def password_hash(password: str) -> str:
    """RabbitMQ's stored form of a password (rabbit_password_hashing_sha256): a 4-byte
    salt, then SHA-256 of salt and password, base64."""
    salt = secrets.token_bytes(4)
    return base64.b64encode(salt + hashlib.sha256(salt + password.encode()).digest()).decode()


def definitions(password: str) -> dict[str, object]:
    every = {"configure": ".*", "write": ".*", "read": ".*"}
    return {
        "users": [
            {
                "name": USER,
                "password_hash": password_hash(password),
                "hashing_algorithm": "rabbit_password_hashing_sha256",
                "tags": ["administrator"],
            }
        ],
        "vhosts": [{"name": vhost} for vhost in VHOSTS],
        "permissions": [{"user": USER, "vhost": vhost, **every} for vhost in VHOSTS],
    }


class RabbitNode:
    """A RabbitMQ node of this test session, stopped (with its epmd) by ``stop``."""

    def __init__(self, base_dir: Path, *, consumer_timeout_ms: int | None = None) -> None:
        self.dir = base_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o700)
        self.port = free_port()
        self.dist_port = free_port()
        self.epmd_port = free_port()
        self.password = secrets.token_urlsafe(16)
        self.name = f"dwtest{os.getpid()}@localhost"
        self._write_config(consumer_timeout_ms)
        self.epmd: subprocess.Popen[bytes] | None = None
        self.server: subprocess.Popen[bytes] | None = None

    def url(self, vhost: str) -> str:
        return f"amqp://{USER}:{self.password}@127.0.0.1:{self.port}/{quote(vhost, safe='')}"

    def _write_config(self, consumer_timeout_ms: int | None) -> None:
        defs = self.dir / "definitions.json"
        defs.write_text(json.dumps(definitions(self.password)))
        lines = [
            f"load_definitions = {defs}",
            "loopback_users = none",
            # A node of the tests' own: no disk alarm on a full CI disk, no fsync waits.
            "disk_free_limit.absolute = 1MB",
        ]
        if consumer_timeout_ms is not None:
            lines.append(f"consumer_timeout = {consumer_timeout_ms}")
        (self.dir / "rabbitmq.conf").write_text("\n".join(lines) + "\n")

    def environment(self) -> dict[str, str]:
        return {
            **os.environ,
            "HOME": str(self.dir),  # the Erlang cookie lives here
            "ERL_EPMD_PORT": str(self.epmd_port),
            "RABBITMQ_NODENAME": self.name,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(self.dir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.dir / "log"),
            "RABBITMQ_FEATURE_FLAGS_FILE": str(self.dir / "feature_flags"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.dir / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(self.dir / "rabbitmq"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(self.dir / "advanced.config"),
        }

    def start(self) -> None:
        env = self.environment()
        log = open(self.dir / "server.log", "ab")  # noqa: SIM115 (the node's, while it runs)
        self.epmd = subprocess.Popen(
            [EPMD, "-port", str(self.epmd_port)], env=env, stdout=log, stderr=log
        )
        self.server = subprocess.Popen(
            [str(SERVER)], env=env, stdout=log, stderr=log, start_new_session=True, cwd=self.dir
        )
        log.close()
        self.wait_ready()

    def wait_ready(self) -> None:
        """Until a client logs in to a virtual host of the definitions (they are loaded
        before the listener opens), within ``START_TIMEOUT_S``."""
        import kombu

        deadline = time.monotonic() + START_TIMEOUT_S
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.server is not None and self.server.poll() is not None:
                raise RuntimeError(f"rabbitmq-server exited: {self.log_tail()}")
            try:
                with kombu.Connection(self.url(VHOSTS[0]), connect_timeout=2) as conn:
                    conn.ensure_connection(max_retries=1, timeout=2)
                return
            except Exception as exc:  # not listening yet, or still booting
                last = exc
                time.sleep(0.25)
        raise TimeoutError(f"RabbitMQ not ready in {START_TIMEOUT_S} s ({last}): {self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        path = self.dir / "server.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM to the node's process group (the Erlang VM stops cleanly), SIGKILL if
        it outlives ``STOP_TIMEOUT_S``; then its epmd."""
        if self.server is not None and self.server.poll() is None:
            stop_group(self.server, STOP_TIMEOUT_S)
        if self.epmd is not None and self.epmd.poll() is None:
            self.epmd.terminate()
            self.epmd.wait(10)


def stop_group(process: subprocess.Popen[bytes], timeout_s: float) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
    except ProcessLookupError:
        pass
    # The VM may outlive the shell script that started it: its group goes with it.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def purge_queues(url: str, queues: Iterable[str]) -> None:
    """Empty ``queues`` on the broker at ``url``: each test starts with no message, as
    each Redis test starts with an empty database. (Not deleted: a worker consuming one
    would have its consumer cancelled.)"""
    import kombu

    with kombu.Connection(url, connect_timeout=5) as conn:
        for queue in queues:
            channel = conn.channel()
            try:
                channel.queue_purge(queue=queue)
            except conn.channel_errors:
                pass
            finally:
                channel.close()
