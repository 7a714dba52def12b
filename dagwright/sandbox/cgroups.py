"""A cgroup per bubblewrap run: the memory (no swap) and pids limits of the whole process
tree, its OOM kills, and killing the tree at once.

Works with cgroups v2 (the memory and pids controllers delegated to this process's
cgroup, or to a ``parent`` directory given) and with v1 memory and pids hierarchies; a
v2 cgroup without controllers still serves to kill the tree. Where no cgroup can be
made, a run has none and the caller falls back to per-process rlimits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dagwright.sandbox.base import MIB, Limits

log = logging.getLogger(__name__)

CGROUP_PREFIX = "dagwright-sandbox-"
STALE_CGROUP_S = 60.0  # a run's cgroup gets its process within milliseconds


@dataclass(frozen=True)
class _Hierarchy:
    own: Path  # this process's cgroup directory in this hierarchy
    version: int
    controllers: frozenset[str]  # of those we use, what a child cgroup here can have


def _own_cgroups() -> dict[str, str]:
    """'' (v2) or a v1 controller list like 'cpu,cpuacct' -> this process's cgroup path."""
    own = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        own[names] = path
    return own


def _cgroup_mounts() -> Iterator[tuple[str, Path, str, set[str]]]:
    """(root, mount point, fstype, options) of each cgroup mount, from mountinfo."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        tail = fields[fields.index("-") + 1 :]
        if tail[0] in ("cgroup", "cgroup2"):
            yield fields[3], Path(fields[4]), tail[0], set(tail[2].split(","))


def _delegated_v2_controllers(own: Path) -> frozenset[str]:
    """The memory and pids controllers children of ``own`` get, enabling them if allowed
    (refused when ``own`` holds processes and is not a root: then children get none)."""
    try:
        offered = set((own / "cgroup.controllers").read_text().split()) & {"memory", "pids"}
        enabled = set((own / "cgroup.subtree_control").read_text().split())
        for name in offered - enabled:
            (own / "cgroup.subtree_control").write_text(f"+{name}")
        return frozenset(set((own / "cgroup.subtree_control").read_text().split()) & offered)
    except OSError:
        return frozenset()


def _hierarchies() -> list[_Hierarchy]:
    """The cgroup hierarchies a run may use, v2 first."""
    try:
        own = _own_cgroups()
        mounts = list(_cgroup_mounts())
    except (OSError, ValueError, IndexError):
        return []
    found = []
    for root, point, fstype, options in mounts:
        wanted = {"memory", "pids"} & options
        names = (
            ""
            if fstype == "cgroup2"
            else next((n for n in own if n and wanted & set(n.split(","))), None)
        )
        path = own.get(names) if names is not None else None
        if path is None or not (path + "/").startswith(root.rstrip("/") + "/"):
            continue
        directory = point / path[len(root.rstrip("/")) :].lstrip("/")
        if fstype == "cgroup2":
            found.append(_Hierarchy(directory, 2, _delegated_v2_controllers(directory)))
        elif wanted:
            found.append(_Hierarchy(directory, 1, frozenset(wanted)))
    return sorted(found, key=lambda h: -h.version)


def _parent_hierarchy(parent: Path) -> list[_Hierarchy]:
    try:
        parent.mkdir(exist_ok=True)
    except OSError as exc:
        log.warning("cannot create the sandbox cgroup parent %s: %s", parent, exc)
        return []
    return [_Hierarchy(parent, 2, _delegated_v2_controllers(parent))]


def _sweep_stale(parent: Path) -> None:
    """Remove run cgroups a killed worker left behind: empty, and older than any run's
    start (a cgroup with processes in it cannot be removed, so a live run is safe)."""
    for directory in parent.glob(CGROUP_PREFIX + "*"):
        with contextlib.suppress(OSError):
            if time.time() - directory.stat().st_mtime > STALE_CGROUP_S:
                directory.rmdir()


def _limit_files(controller: str, limits: Limits) -> list[tuple[str, str]]:
    """(file, value) pairs that bound ``controller``; files absent here are skipped."""
    if controller == "pids":
        return [("pids.max", str(limits.pids))]
    memory = str(limits.memory_mb * MIB)
    return [
        ("memory.max", memory),  # v2
        ("memory.swap.max", "0"),
        ("memory.limit_in_bytes", memory),  # v1 (before memsw, which must be >= it)
        ("memory.memsw.limit_in_bytes", memory),
    ]


@dataclass
class RunCgroup:
    """The cgroups of one execution (possibly none): join, limit, kill, count OOM kills."""

    dirs: list[Path] = field(default_factory=list)
    limited: set[str] = field(default_factory=set)  # "memory", "pids"

    @classmethod
    def create(cls, limits: Limits, parent: Path | None = None) -> RunCgroup:
        """The run's cgroups: under ``parent`` (a cgroup v2 directory, made if missing)
        if given, else under this process's own cgroup in each hierarchy."""
        run = cls()
        name = CGROUP_PREFIX + uuid.uuid4().hex[:12]
        for hierarchy in _hierarchies() if parent is None else _parent_hierarchy(parent):
            wanted = hierarchy.controllers - run.limited
            if hierarchy.version == 1 and not wanted:
                continue
            _sweep_stale(hierarchy.own)
            try:
                (hierarchy.own / name).mkdir()
            except OSError:
                continue
            run.dirs.append(hierarchy.own / name)
            run.limited |= {c for c in wanted if run._bound(hierarchy.own / name, c, limits)}
        return run

    @staticmethod
    def _bound(directory: Path, controller: str, limits: Limits) -> bool:
        written = False
        for name, value in _limit_files(controller, limits):
            if (directory / name).exists():
                try:
                    (directory / name).write_text(value)
                    written = True
                except OSError as exc:
                    log.debug("cgroup %s: %s=%s refused: %s", directory, name, value, exc)
        return written

    def open_procs(self) -> list[int]:
        """Write-only fds of each ``cgroup.procs``, for the child to join before exec."""
        return [os.open(d / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for d in self.dirs]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for directory in self.dirs:
            try:
                found.update(int(p) for p in (directory / "cgroup.procs").read_text().split())
            except OSError:
                continue
        return found

    def kill(self, timeout_s: float = 5.0) -> None:
        """Kill every process of the run and wait until none is left."""
        deadline = time.monotonic() + timeout_s
        for directory in self.dirs:
            if (directory / "cgroup.kill").exists():
                with contextlib.suppress(OSError):
                    (directory / "cgroup.kill").write_text("1")
        while (left := self.pids()) and time.monotonic() < deadline:
            for pid in left:  # without cgroup.kill (cgroups v1 only)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def oom_kills(self) -> int:
        count = 0
        for directory in self.dirs:
            for name in ("memory.events", "memory.oom_control"):
                try:
                    lines = (directory / name).read_text().splitlines()
                except OSError:
                    continue
                pairs = dict(line.split(" ", 1) for line in lines if " " in line)
                count += int(pairs.get("oom_kill", "0"))
        return count

    def remove(self) -> None:
        self.kill()
        for directory in self.dirs:
            try:
                directory.rmdir()
            except OSError as exc:
                log.warning("could not remove sandbox cgroup %s: %s", directory, exc)
