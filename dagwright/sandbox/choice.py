"""Which sandbox runs code here: the configured backend, or the first whose self-test
passes (docker, then bubblewrap). None passing means code is refused, never run
unsandboxed.

The choice is made once per process and settings (a self-test runs a container or a
bwrap process: too slow to repeat per node); a failed choice is not remembered, so
starting Docker later is picked up by the next node.
"""

from __future__ import annotations

import threading

from dagwright.errors import MissingExtraError, SandboxUnavailableError
from dagwright.sandbox.base import Sandbox
from dagwright.settings import SandboxSettings

AUTO_ORDER = ("docker", "bubblewrap")

# Keyed by the settings build_backend reads (all of them: a frozen dataclass).
_chosen: dict[SandboxSettings, Sandbox] = {}
_lock = threading.Lock()


def build_backend(name: str, settings: SandboxSettings) -> Sandbox:
    """A backend by name (imported lazily: the docker SDK is only loaded when used)."""
    if name == "docker":
        if settings.python == "worker":
            raise SandboxUnavailableError(
                "docker: sandbox_python=worker runs the worker's own interpreter, which the "
                "image does not have: use the bubblewrap backend (or sandbox_python=system)"
            )
        try:
            from dagwright.sandbox.docker import DockerSandbox
        except ImportError as exc:
            raise SandboxUnavailableError(str(MissingExtraError.of(exc, "docker"))) from None

        return DockerSandbox.from_settings(settings)
    if name == "bubblewrap":
        from dagwright.sandbox.bubblewrap import BubblewrapSandbox

        return BubblewrapSandbox.from_settings(settings)
    raise SandboxUnavailableError(f"unknown sandbox backend {name!r}: docker or bubblewrap")


def candidate_names(settings: SandboxSettings) -> tuple[str, ...]:
    return AUTO_ORDER if settings.backend == "auto" else (settings.backend,)


def probe(name: str, settings: SandboxSettings) -> Sandbox | str:
    """The backend if it is usable here, else why not (one line: the self-test says
    exactly what is missing, e.g. the daemon or the image)."""
    try:
        sandbox = build_backend(name, settings)
        sandbox.self_test()
    except SandboxUnavailableError as exc:
        return str(exc)
    return sandbox


def choose_sandbox(settings: SandboxSettings) -> Sandbox:
    """The sandbox code runs in; SandboxUnavailableError naming each backend's problem."""
    key = settings
    with _lock:
        if key in _chosen:
            return _chosen[key]
        reasons = []
        for name in candidate_names(settings):
            found = probe(name, settings)
            if isinstance(found, str):
                reasons.append(found)
                continue
            _chosen[key] = found
            return found
    raise SandboxUnavailableError(
        "no sandbox backend works here, so code is refused (it never runs unsandboxed): "
        + "; ".join(reasons)
    )


def forget_choice() -> None:
    """Choose again at the next run (tests; a host whose Docker came or went)."""
    with _lock:
        _chosen.clear()
