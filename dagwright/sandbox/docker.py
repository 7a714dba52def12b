"""The docker backend: every execution in a fresh, throw-away container (docker SDK).

The container (see :func:`container_args`) has no network, a read-only root, sized
``noexec`` tmpfs for ``/tmp`` and ``/scratch`` (its working directory), memory without
swap, one CPU, a pids limit, rlimits, no capabilities left to the code,
``no-new-privileges``, dagwright's seccomp profile (the deny-list of
:mod:`dagwright.sandbox.seccomp`, shared with bubblewrap), the code running as an
unprivileged uid under a root init that reaps orphans, and no environment of the host.
It is removed after the run whatever happened.

Choices, and what was rejected:

- The code and its input go on stdin (:func:`dagwright.sandbox.base.encode_stdin`), through
  an attach socket opened *before* the container starts, so no output is missed. Rejected:
  ``put_archive`` (the root is read-only, and it is one more API call) and the code in argv
  (Linux caps one argument at 128 KiB).
- The container is created with ``detach=False``: in docker-py that alone sets
  ``StdinOnce``, which makes closing our side of stdin close the program's. With
  ``detach=True`` the program waits for the end of its input for ever.
- Log driver ``none``: output is read from the attach stream, capped here; the daemon
  never writes it to its disk, so a flood of output cannot fill it.
- ``ipc_mode="none"``: no ``/dev/shm``, so the only writable places are the two tmpfs
  (the price: ``multiprocessing`` locks do not work). Both tmpfs are charged to the
  container's memory limit, so ``memory_mb`` bounds them together.
- The init (``init=True``: the engine's tini, pid 1) runs as root, the code as ``uid``.
  Code with the init's own uid could ptrace it, or write its ``/proc/1/mem``, and stop
  it: the run then stalls until the wall limit, as the container ends only when its
  init does. Across uids the kernel refuses ptrace, ``/proc/1/mem``, ``process_vm_*``,
  ``prlimit`` and signals (no CAP_KILL); the seccomp profile refuses ptrace and
  ``process_vm_*`` as well. So the container starts as root with only CAP_SETUID,
  CAP_SETGID and CAP_SETPCAP, and :func:`privilege_drop` gives up root and all three
  before it execs the runner. The engine makes the capabilities it grants the
  container's *bounding* set as well, and a change of uid empties the effective,
  permitted and ambient sets but never the bounding set: only ``PR_CAPBSET_DROP`` does,
  which needs CAP_SETPCAP (hence the third). So the code runs with every set empty,
  bounding included (before: ``CapBnd`` was ``00000000000000c0``, SETUID and SETGID).
  Rejected: the image's ``setpriv`` (one more binary the image must have), and
  dropping without an exec (the process stays non-dumpable: /proc/self is root's).
- The seccomp profile replaces the engine's default rather than extending it: see
  :mod:`dagwright.sandbox.seccomp` for why.
- ``python3 -I`` (isolated mode): no ``PYTHON*`` variable, user site or working directory
  on ``sys.path`` can change what the interpreter imports.
- Output past ``output_bytes`` ends the run (kill, ``truncated``) rather than being
  drained: a program that floods its output is not worth more CPU.
- The warm pool (``warm_pool=N``) keeps N containers per ``Limits`` already *started*,
  their interpreter waiting for the code on stdin; a run then skips create, attach and
  start: median ``print(1)`` 0.25 s cold, 0.08 s warm (``benchmarks/sandbox.py``). Each
  container still serves exactly one run, and its wall time starts with the code.
  Rejected: pooling containers created but not started (0.22 s: it saves only the
  create), and removing containers after the result in the background (0.01 s).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import socket
import struct
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import docker
from docker.errors import DockerException, ImageNotFound, NotFound
from docker.models.containers import Container

from dagwright.errors import SandboxFailedError, SandboxUnavailableError
from dagwright.sandbox.base import (
    CANCEL_POLL_S,
    MIB,
    RUNNER,
    ExecutionResult,
    Limits,
    encode_stdin,
    probe_isolation,
)
from dagwright.sandbox.seccomp import docker_profile
from dagwright.settings import SandboxSettings

log = logging.getLogger(__name__)

LABEL = "dagwright.sandbox"
"""Label on every container this backend creates (``docker ps -a --filter label=...``)."""
SCRATCH_DIR = "/scratch"
HOSTNAME = "sandbox"
CONNECT_TIMEOUT_S = 3.0  # first contact with the daemon (it negotiates the API version)
API_TIMEOUT_S = 60.0  # any later API call (create can be slow on a loaded host)
WAIT_GRACE_S = 1.0  # for the exit status, after the output ended before the deadline
STDOUT, STDERR = 1, 2  # stream types of the attach protocol's 8-byte frame headers
OUT_OF_CPU = 128 + 24  # the init's exit status when the program dies of SIGXCPU
TMPFS_FLAGS = "mode=1777,noexec,nosuid,nodev"
POOLED_LIMITS_MAX = 4  # the warm pool serves the first few Limits it sees, no more
SECCOMP_OPTION = "seccomp=" + json.dumps(docker_profile(), separators=(",", ":"))
"""The ``security_opt`` entry that applies dagwright's seccomp profile (the JSON itself)."""
ROOT_USER = "0:0"  # the init's; the code runs as the sandbox uid (see privilege_drop)
PRIVILEGE_DROP_CAPS = ("SETUID", "SETGID", "SETPCAP")  # what privilege_drop needs, gives up
PR_CAPBSET_DROP = 24  # a prctl option (linux/prctl.h)


def privilege_drop(uid: int) -> str:
    """The container's first program (``python3 -I -S -c``): as root, empty the capability
    bounding set (up to the kernel's last capability; a refusal ends the container before
    the code runs), become ``uid`` (no groups, no capabilities left), then exec the
    runner. The exec makes the process dumpable again: after a change of uid the kernel
    marks it not, which would give its ``/proc/self`` files to root."""
    return (
        "import ctypes,os,sys\n"
        "_p=ctypes.CDLL(None,use_errno=True).prctl\n"
        "for _c in range(int(open('/proc/sys/kernel/cap_last_cap').read())+1):\n"
        f" if _p({PR_CAPBSET_DROP},_c,0,0,0):raise OSError(ctypes.get_errno(),'capbset')\n"
        "os.setgroups([])\n"
        f"os.setresgid({uid},{uid},{uid})\n"
        f"os.setresuid({uid},{uid},{uid})\n"
        f"os.execv(sys.executable,['python3','-I','-c',{RUNNER!r}])\n"
    )


def container_args(image: str, limits: Limits, *, uid: int) -> dict[str, Any]:
    """The keyword arguments of ``client.containers.create`` for one execution."""
    memory = limits.memory_mb * MIB
    # Owned by uid: runc gives a tmpfs the mode of the directory it covers, not mode=.
    tmpfs = f"size={limits.scratch_mb}m,uid={uid},gid={uid},{TMPFS_FLAGS}"
    cpu_s = max(1, math.ceil(limits.cpu_time_s))
    return {
        "image": image,
        "command": ["python3", "-I", "-S", "-c", privilege_drop(uid)],  # -S: it needs no site
        "detach": False,  # sets StdinOnce (see the module docstring); create never blocks
        "stdin_open": True,
        "tty": False,
        "user": ROOT_USER,
        "environment": {},
        "use_config_proxy": False,  # else docker-py copies the host's proxy settings in
        "hostname": HOSTNAME,
        "working_dir": SCRATCH_DIR,
        "labels": {LABEL: "1"},
        "network_mode": "none",
        "ipc_mode": "none",
        "read_only": True,
        "tmpfs": {"/tmp": tmpfs, SCRATCH_DIR: tmpfs},
        "mem_limit": memory,
        "memswap_limit": memory,
        "nano_cpus": 1_000_000_000,
        "pids_limit": limits.pids,
        "ulimits": [
            {"name": "nofile", "soft": limits.open_files, "hard": limits.open_files},
            {"name": "fsize", "soft": limits.file_size_mb * MIB, "hard": limits.file_size_mb * MIB},
            {"name": "cpu", "soft": cpu_s, "hard": cpu_s + 1},  # SIGXCPU, then SIGKILL
            {"name": "core", "soft": 0, "hard": 0},
        ],
        "cap_drop": ["ALL"],
        "cap_add": list(PRIVILEGE_DROP_CAPS),
        "security_opt": ["no-new-privileges", SECCOMP_OPTION],
        "init": True,
        "log_config": {"type": "none"},
    }


@contextmanager
def _docker_failures(action: str) -> Iterator[None]:
    """Translate the SDK's errors (and requests', which are OSErrors) at the boundary."""
    try:
        yield
    except (DockerException, OSError) as exc:
        raise SandboxFailedError(f"docker: {action} failed: {exc}") from exc


@dataclass
class _Booted:
    """A started container whose program waits for its code on ``sock``."""

    container: Container
    sock: socket.socket
    started_at: float


class _Demux:
    """Splits the attach stream (8-byte header: stream type, length; then the payload)
    into stdout and stderr, keeping at most ``cap`` bytes of each."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kept = {STDOUT: bytearray(), STDERR: bytearray()}
        self.truncated = False
        self._header = bytearray()
        self._kind = 0
        self._left = 0

    def feed(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self._left == 0:
                need = 8 - len(self._header)
                self._header += view[:need]
                view = view[need:]
                if len(self._header) == 8:
                    self._kind, self._left = struct.unpack(">BxxxL", self._header)
                    self._header.clear()
                continue
            chunk = view[: self._left]
            view = view[len(chunk) :]
            self._left -= len(chunk)
            self._keep(self._kind, chunk)

    def _keep(self, kind: int, chunk: memoryview) -> None:
        kept = self.kept.get(kind)
        if kept is None:
            return
        room = self.cap - len(kept)
        kept += chunk[:room]
        self.truncated = self.truncated or len(chunk) > room

    def text(self, kind: int) -> str:
        return self.kept[kind].decode("utf-8", errors="replace")


class DockerSandbox:
    """Runs code in a fresh container of ``image`` as ``uid``, one container per run.

    Nothing contacts the daemon until the first call. Safe to share between threads.
    With ``warm_pool``, call :meth:`close` (or use ``with``) to remove the waiting
    containers; otherwise they are removed at interpreter exit.
    """

    name = "docker"

    def __init__(
        self,
        image: str = "dagwright-sandbox:latest",
        *,
        uid: int = 65534,
        client: docker.DockerClient | None = None,
        warm_pool: int = 0,
    ) -> None:
        self.image = image
        self.uid = uid
        self._engine = _Engine(image, uid, client)
        self._pool = _WarmPool(warm_pool, self._engine) if warm_pool > 0 else None
        if self._pool is not None:
            weakref.finalize(self, self._pool.close)

    @classmethod
    def from_settings(cls, sandbox: SandboxSettings) -> DockerSandbox:
        return cls(sandbox.image, uid=sandbox.uid, warm_pool=sandbox.warm_pool)

    def available(self) -> bool:
        """The daemon answers and has the image."""
        try:
            client = self._engine.client()
            client.ping()
            client.images.get(self.image)
        except Exception:
            return False
        return True

    def self_test(self) -> None:
        """SandboxUnavailableError if the daemon or the image is missing, or if
        :data:`~dagwright.sandbox.base.PROBE` finds the isolation wanting. (Its environment
        is not checked: the image may set variables; ``container_args`` passes none.)"""
        try:
            self._engine.client().images.get(self.image)
        except ImageNotFound:
            raise SandboxUnavailableError(self._engine.missing_image()) from None
        except Exception as exc:
            host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
            raise SandboxUnavailableError(
                f"docker: cannot reach the Docker daemon at {host} ({exc}): start it, or set "
                "DOCKER_HOST (ops/docker/start-test-dockerd.sh starts one for tests)"
            ) from exc
        try:
            problems = probe_isolation(self, uid=self.uid)
        except SandboxFailedError as exc:
            raise SandboxUnavailableError(f"docker: the probe container failed: {exc}") from exc
        if problems:
            raise SandboxUnavailableError("docker: self-test failed: " + "; ".join(problems))

    def run(
        self,
        code: str,
        *,
        input_json: str = "null",
        limits: Limits,
        cancel: threading.Event | None = None,
    ) -> ExecutionResult:
        booted = self._pool.take(limits) if self._pool is not None else None
        if booted is not None:
            booted.started_at = time.monotonic()  # its time starts with the code
        try:
            booted = booted or self._engine.boot(limits)
            with _CancelWatch(cancel, booted.container) as watch:
                result = self._engine.execute(booted, encode_stdin(code, input_json), limits)
            if watch.fired:
                return replace(result, exit_code=None, timed_out=False, cancelled=True)
            return result
        finally:
            if booted is not None:
                self._engine.discard(booted.container, booted.sock)

    def prewarm(self, limits: Limits) -> None:
        """Fill the warm pool for ``limits`` now (at worker start: the first run is warm)."""
        if self._pool is not None:
            self._pool.fill(limits)

    def close(self) -> None:
        """Remove the warm pool's containers."""
        if self._pool is not None:
            self._pool.close()

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _Engine:
    """The daemon's side of a run: boot a container, talk to it, remove it."""

    def __init__(self, image: str, uid: int, client: docker.DockerClient | None) -> None:
        self.image = image
        self.uid = uid
        self._docker = client
        self._lock = threading.Lock()

    def client(self) -> docker.DockerClient:
        with self._lock:
            if self._docker is None:
                client = docker.from_env(timeout=CONNECT_TIMEOUT_S)
                client.api.timeout = API_TIMEOUT_S
                self._docker = client
            return self._docker

    def missing_image(self) -> str:
        return (
            f"docker: image {self.image} not found: build it with `docker build -t "
            f"{self.image} -f ops/docker/sandbox.Dockerfile ops/docker`"
        )

    def boot(self, limits: Limits) -> _Booted:
        """Create a container, attach to its stdio, start it."""
        args = container_args(self.image, limits, uid=self.uid)
        try:
            with _docker_failures("creating a container"):
                container = self.client().containers.create(**args)
        except SandboxFailedError as exc:
            if isinstance(exc.__cause__, ImageNotFound):
                raise SandboxUnavailableError(self.missing_image()) from exc
            raise
        sock = None
        try:
            with _docker_failures("starting a container"):
                params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
                raw = container.attach_socket(params=params)
                sock = getattr(raw, "_sock", raw)  # the socket under the SocketIO
                started_at = time.monotonic()
                container.start()
        except BaseException:
            self.discard(container, sock)
            raise
        return _Booted(container, sock, started_at)

    def discard(self, container: Container, sock: socket.socket | None) -> None:
        if sock is not None:
            _hang_up(sock)
        try:
            container.remove(force=True)
        except NotFound:
            pass  # gone already
        except (DockerException, OSError) as exc:
            log.warning("docker: could not remove container %s: %s", container.id, exc)

    def running(self, container: Container) -> bool:
        try:
            return bool(self.client().api.inspect_container(container.id)["State"]["Running"])
        except (DockerException, OSError):
            return False

    def execute(self, booted: _Booted, payload: bytes, limits: Limits) -> ExecutionResult:
        deadline = booted.started_at + limits.wall_time_s
        demux = _Demux(limits.output_bytes)
        in_time = _send(booted.sock, payload, deadline) and _receive(booted.sock, demux, deadline)
        exit_code = None
        if in_time and not demux.truncated:
            exit_code = self._exit_code(booted.container, deadline)
        with _docker_failures("inspecting a container"):
            state = self.client().api.inspect_container(booted.container.id)["State"]
        oom = bool(state.get("OOMKilled"))
        if exit_code == OUT_OF_CPU and not oom:
            exit_code = None  # its CPU time ran out: reported as out of time
        return ExecutionResult(
            stdout=demux.text(STDOUT),
            stderr=demux.text(STDERR),
            exit_code=exit_code,
            timed_out=exit_code is None and not demux.truncated,
            oom=oom,
            truncated=demux.truncated,
            duration_s=time.monotonic() - booted.started_at,
        )

    def _exit_code(self, container: Container, deadline: float) -> int | None:
        """The exit status, or None if the program outlives its deadline (it closed its
        output but runs on)."""
        try:
            status = container.wait(timeout=max(deadline - time.monotonic(), 0) + WAIT_GRACE_S)
        except (DockerException, OSError) as exc:
            if time.monotonic() >= deadline:
                return None
            raise SandboxFailedError(f"docker: waiting for a container failed: {exc}") from exc
        return int(status["StatusCode"])


class _CancelWatch:
    """Kills the container once ``cancel`` is set, from a thread of its own, while the
    run's thread blocks on the output: the output then ends, and the run returns at once.
    (Polling the event from the reading loop would miss the wait for the exit status.)"""

    def __init__(self, cancel: threading.Event | None, container: Container) -> None:
        self._cancel = cancel
        self._container = container
        self._done = threading.Event()
        self.fired = False

    def __enter__(self) -> _CancelWatch:
        if self._cancel is not None:
            threading.Thread(
                target=self._watch, name="dagwright-sandbox-cancel", daemon=True
            ).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()

    def _watch(self) -> None:
        assert self._cancel is not None
        while not self._done.is_set():
            if self._cancel.wait(CANCEL_POLL_S):
                self.fired = True
                try:
                    self._container.kill()
                except (DockerException, OSError) as exc:  # gone already, or the daemon is
                    log.info("docker: killing cancelled container %s: %s", self._container.id, exc)
                return


def _hang_up(sock: socket.socket) -> None:
    """Close the attach connection now. (``close`` alone waits for the SDK's file objects
    on it to be collected; till then the daemon blocks on output nobody reads, and cannot
    remove the container.)"""
    with contextlib.suppress(OSError):  # already down
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


def _send(sock: socket.socket, payload: bytes, deadline: float) -> bool:
    """Write the program's stdin and close it; False if the deadline passed first."""
    try:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
    except TimeoutError:
        return False
    except OSError:
        pass  # the program is gone already: its output and exit status say why
    return True


def _receive(sock: socket.socket, demux: _Demux, deadline: float) -> bool:
    """Read the output until it ends or overflows; False if the deadline passed first."""
    while not demux.truncated:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        sock.settimeout(remaining)
        try:
            data = sock.recv(65536)
        except TimeoutError:
            return False
        except OSError:
            return True  # the daemon dropped the stream: waiting for the exit tells why
        if not data:
            return True
        demux.feed(data)
    return True


class _WarmPool:
    """Up to ``size`` booted containers for each of the first ``POOLED_LIMITS_MAX``
    ``Limits`` asked for (others run cold), refilled in the background."""

    def __init__(self, size: int, engine: _Engine) -> None:
        self._size = size
        self._engine = engine
        self._ready: dict[Limits, list[_Booted]] = {}
        self._filling: dict[Limits, threading.Thread] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._closed = False

    def take(self, limits: Limits) -> _Booted | None:
        """A ready container for ``limits`` if there is one; starts a refill."""
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's containers are not ours
                self._ready, self._filling, self._pid = {}, {}, os.getpid()
            if limits not in self._ready and len(self._ready) >= POOLED_LIMITS_MAX:
                return None
            ready = self._ready.setdefault(limits, [])
            booted = ready.pop(0) if ready else None
            if limits not in self._filling and not self._closed:
                refill = threading.Thread(target=self._refill, args=(limits,), daemon=True)
                self._filling[limits] = refill
                refill.start()
        if booted is not None and not self._engine.running(booted.container):
            self._engine.discard(booted.container, booted.sock)  # died waiting (docker rm...)
            return None
        return booted

    def fill(self, limits: Limits) -> None:
        """Boot containers for ``limits`` until there are ``size`` ready."""
        while True:
            with self._lock:
                ready = self._ready.setdefault(limits, [])
                if self._closed or len(ready) >= self._size:
                    return
            booted = self._engine.boot(limits)
            with self._lock:
                ready = self._ready.setdefault(limits, [])
                if not self._closed and len(ready) < self._size:
                    ready.append(booted)
                    continue
            self._engine.discard(booted.container, booted.sock)

    def _refill(self, limits: Limits) -> None:
        try:
            self.fill(limits)
        except Exception as exc:
            log.warning("docker: could not fill the warm pool: %s", exc)
        finally:
            with self._lock:
                self._filling.pop(limits, None)

    def close(self) -> None:
        """Stop refilling, wait for the boots under way, remove every ready container."""
        with self._lock:
            self._closed = True
            refills = list(self._filling.values())
        for refill in refills:
            refill.join()
        with self._lock:
            doomed = [booted for ready in self._ready.values() for booted in ready]
            self._ready.clear()
        for booted in doomed:
            self._engine.discard(booted.container, booted.sock)
