"""What sandboxed code can import, as the sandbox itself reports it.

``run_python``'s description, the coder's prompt and the planner's catalog say which
Python and which packages the code has. They are read by running :data:`ENVIRONMENT_PROBE`
in this host's sandbox (once per process and settings), so they name what is installed
(the packages' virtualenv, the image, or the system's own packages), not what a setting
hopes for. Where no sandbox works, the line says so and names the declared list.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

from dagwright.errors import SandboxFailedError, SandboxUnavailableError
from dagwright.sandbox.base import PROBE_LIMITS
from dagwright.sandbox.choice import choose_sandbox
from dagwright.settings import SandboxSettings

ENVIRONMENT_PROBE = """\
import importlib.metadata, json, platform
names = {(d.metadata["Name"] or "", d.version) for d in importlib.metadata.distributions()}
packages = sorted(name for name in names if name[0])
print(json.dumps({"python": platform.python_version(), "packages": packages}))
"""
MAX_LISTED = 60  # a system interpreter may carry many distribution packages
RETRY_AFTER_S = 60.0  # where no sandbox works, ask again only this often

_found: dict[SandboxSettings, SandboxEnvironment] = {}
_failed_at: dict[SandboxSettings, float] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class SandboxEnvironment:
    """The sandbox's Python version and installed distributions (name, version)."""

    python: str
    packages: tuple[tuple[str, str], ...]

    def listed(self) -> str:
        """``six 1.17.0, attrs 23.2.0`` (capped at MAX_LISTED), or "" for none."""
        names = [f"{name} {version}" for name, version in self.packages[:MAX_LISTED]]
        more = len(self.packages) - MAX_LISTED
        return ", ".join(names) + (f" and {more} more" if more > 0 else "")

    def describe(self) -> str:
        """One sentence for the model and the planner."""
        if not self.packages:
            return (
                f"The sandbox has Python {self.python} with its standard library only: no other "
                "package, and none can be installed (no network)."
            )
        return (
            f"The sandbox has Python {self.python} with its standard library and only these "
            f"packages: {self.listed()}. Nothing else can be installed (no network)."
        )


def sandbox_environment(sandbox: SandboxSettings) -> SandboxEnvironment | None:
    """What this host's sandbox offers code, asked of it once; None if no sandbox works
    here (asked again after RETRY_AFTER_S: one may work later)."""
    with _lock:
        if sandbox in _found:
            return _found[sandbox]
        if time.monotonic() - _failed_at.get(sandbox, -RETRY_AFTER_S) < RETRY_AFTER_S:
            return None
    try:
        result = choose_sandbox(sandbox).run(ENVIRONMENT_PROBE, limits=PROBE_LIMITS)
        report = json.loads(result.stdout) if result.ok else None
    except (SandboxUnavailableError, SandboxFailedError, ValueError):
        report = None
    if not isinstance(report, dict):
        with _lock:
            _failed_at[sandbox] = time.monotonic()
        return None
    found = SandboxEnvironment(report["python"], tuple(tuple(p) for p in report["packages"]))
    with _lock:
        _found[sandbox] = found
    return found


def describe_sandbox(sandbox: SandboxSettings) -> str:
    """The sentence the tools and prompts give, also where no sandbox works here."""
    found = sandbox_environment(sandbox)
    if found is not None:
        return found.describe()
    declared = ", ".join(sandbox.packages) or "none"
    return (
        "No sandbox works on this host, so what it offers is unknown: the standard library, "
        f"and the packages declared for it ({declared}) if they were installed."
    )


def forget_environments() -> None:
    """Ask the sandbox again (tests; after `dagwright sandbox install`)."""
    with _lock:
        _found.clear()
        _failed_at.clear()
