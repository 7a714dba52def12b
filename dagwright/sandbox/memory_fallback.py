"""How a bubblewrap run's memory is bounded where no memory cgroup can be made for it.

RLIMIT_AS bounds one process's address space, not a tree's: with ``memory_mb`` per
process, N processes may hold N times ``memory_mb`` (a multi-process memory bomb). So,
without a memory cgroup, the run is split: at most ``tasks`` tasks (processes and
threads), each with ``memory_mb / tasks`` of address space. A process's resident memory
never exceeds its address space, so the whole tree holds at most ``memory_mb`` (plus the
scratch tmpfs, bounded by its own size, and bwrap's two small processes, which run no
model code).

The task bound is RLIMIT_NPROC, set *inside* the sandbox by the first lines the sandboxed
interpreter runs (:func:`task_limit_preamble`, before the model's code): since Linux 5.14
the kernel counts RLIMIT_NPROC per user namespace, and each run has its own, so the count
is the run's own tasks only (bwrap's pid 1 and the program's), not every process of the
uid on the host. The code cannot raise it back (raising a hard limit needs
CAP_SYS_RESOURCE in the host's namespace). On an older kernel the same limit counts every
process of the uid: still a bound, only tighter. The address-space limit is set with the
others, before bwrap starts.

Rejected: RLIMIT_NPROC set outside, before bwrap (it counts every process of the uid on
the host, so concurrent runs and the worker's own threads share it: a run could not even
start while another held its tasks, and a non-root worker's exiting threads would hand
their slots to the code); refusing to run without a cgroup by default (a worker that is
not root rarely gets one, and the split is a real bound): ``memory_fallback_tasks = 0``
chooses refusal.
"""

from __future__ import annotations

from dataclasses import dataclass

from dagwright.sandbox.base import MIB

NAMESPACE_TASKS = 1  # bwrap's pid 1 of the run's namespace, counted there with the program


@dataclass(frozen=True)
class MemoryBound:
    """How a run's memory is bounded: by a cgroup, split over ``tasks`` tasks, or
    neither (``tasks`` 0: code is refused)."""

    cgroup: bool
    tasks: int
    memory_mb: int

    @property
    def refused(self) -> bool:
        return not self.cgroup and self.tasks == 0

    @property
    def address_space_bytes(self) -> int:
        """RLIMIT_AS of each process of the run."""
        if self.cgroup:
            return self.memory_mb * MIB
        return self.memory_mb * MIB // self.tasks

    def describe(self) -> str:
        """One line for ``dagwright doctor`` and errors."""
        if self.cgroup:
            return f"a memory cgroup holds each run's whole process tree to {self.memory_mb} MiB"
        if self.refused:
            return (
                "no memory cgroup can be made here, and sandbox_memory_fallback_tasks=0 "
                "refuses to run code without one"
            )
        each = self.address_space_bytes // MIB
        return (
            f"no memory cgroup here: each run is held to {self.tasks} tasks of {each} MiB "
            f"address space each (RLIMIT_NPROC and RLIMIT_AS, {self.memory_mb} MiB in all)"
        )


def task_limit_preamble(tasks: int) -> str:
    """Python run in the sandbox before the runner: the run's namespace may hold
    ``tasks`` tasks besides bwrap's pid 1 (see the module docstring)."""
    limit = tasks + NAMESPACE_TASKS
    return f"import resource\nresource.setrlimit(resource.RLIMIT_NPROC,({limit},{limit}))\n"
