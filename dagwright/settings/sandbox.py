"""The sandbox that runs model-written code: its backend, its packages, its limits."""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from dagwright.settings.connections import default_data_dir
from dagwright.settings.section import CommaList, Section

_VERSION_CLAUSE = r"(===?|~=|!=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+"
REQUIREMENT = re.compile(
    rf"[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*\])?"
    rf"(\s*{_VERSION_CLAUSE}(\s*,\s*{_VERSION_CLAUSE})*)?"
)
"""A requirement of ``sandbox_packages``: a name on the index, its extras, its versions."""


class SandboxSettings(Section):
    """The sandbox: which backend, built how, and the default limits of the code it runs."""

    prefix: ClassVar[str] = "sandbox_"

    backend: str = Field("auto", pattern="^(auto|docker|bubblewrap)$")
    """Where model-written code runs: ``docker``, ``bubblewrap``, or ``auto`` (the first
    of those two whose self-test passes). Never unsandboxed: with none, code is refused."""

    image: str = "dagwright-sandbox:latest"
    """Docker image of the docker backend (``ops/docker/sandbox.Dockerfile``)."""

    warm_pool: int = Field(0, ge=0, le=16)
    """docker backend: containers kept started and waiting for code (0: none), which cuts
    a run's start from about 0.3 s to 0.08 s."""

    uid: int = Field(65534, ge=1)
    """Unprivileged uid (and gid) the sandboxed program runs as (never root)."""

    python: Literal["system", "worker"] = "system"
    """Which interpreter python nodes and ``run_python`` get. ``system``: the host's
    ``python3`` with its standard library (and, bubblewrap, the ``sandbox_packages``
    virtualenv once installed). ``worker``: the worker's own interpreter
    and environment (its virtualenv's packages), mounted read-only in the sandbox, still
    with no network, no secrets and the same limits; bubblewrap backend only (a docker
    image has its own interpreter)."""

    packages: CommaList = Field(default_factory=list)
    """Packages the sandboxed code may import besides the standard library: requirement
    specifiers (``six``, ``attrs==23.2.0``; comma-separated, or a JSON list for
    specifiers with commas) installed ahead of time, never by the code (the sandbox has
    no network): by ``dagwright sandbox install`` into ``sandbox_packages_dir`` for
    bubblewrap, into the image for docker (``ops/docker/sandbox.Dockerfile``, build arg
    ``SANDBOX_PACKAGES``). The tools and prompts list what is actually installed."""

    packages_dir: Path = Field(default_factory=lambda: default_data_dir() / "sandbox-packages")
    """bubblewrap: the virtualenv ``dagwright sandbox install`` builds the packages into,
    mounted read-only in the sandbox (default: ``<data_dir>/sandbox-packages``)."""

    install_timeout_s: float = Field(600.0, gt=0)
    """How long ``dagwright sandbox install`` may take (pip included) before it stops."""

    cgroup_parent: Path | None = None
    """bubblewrap: a cgroup v2 directory delegated to the worker (memory and pids
    controllers), made if missing, under which each run gets its cgroup. Unset: the
    worker's own cgroup in each hierarchy (which, on a pure cgroups v2 host, rarely offers
    controllers to children)."""

    memory_fallback_tasks: int = Field(4, ge=0, le=64)
    """bubblewrap, where no memory cgroup can be made for a run: its memory is bounded as
    this many tasks (processes and threads; bwrap's own are extra) of
    ``sandbox_memory_mb`` / N address space each (RLIMIT_NPROC and RLIMIT_AS), so the whole
    tree stays within ``sandbox_memory_mb``. 0: refuse to run code without a memory
    cgroup. ``dagwright doctor`` says which bound is in force."""

    wall_time_s: float = Field(30.0, gt=0)
    """Wall-clock limit of one execution."""

    cpu_time_s: float = Field(30.0, gt=0)
    """CPU-time limit of one execution."""

    memory_mb: int = Field(256, ge=16)
    """Memory of the whole process tree of one execution."""

    pids: int = Field(64, ge=4)
    """Processes and threads of one execution."""

    open_files: int = Field(64, ge=16)
    """Open files of each sandboxed process."""

    file_size_mb: int = Field(16, ge=1)
    """Largest file a sandboxed program may write."""

    scratch_mb: int = Field(64, ge=1)
    """Size of the sandbox's writable tmpfs."""

    output_bytes: int = Field(1_000_000, ge=1024)
    """Stdout and stderr kept of one execution, each; the rest is dropped."""

    @field_validator("packages")
    @classmethod
    def _index_requirements(cls, packages: list[str]) -> list[str]:
        # Names and versions from the package index only: no URL, path or pip option.
        bad = [spec for spec in packages if not REQUIREMENT.fullmatch(spec.strip())]
        if bad:
            raise ValueError(
                f"not a package of the index (name, optional extras and versions): {bad[0]!r}"
            )
        return [spec.strip() for spec in packages]
