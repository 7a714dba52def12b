"""The sandbox backends tests run against: every one that works here.

A backend that is not available is skipped with its reason, except when
``DAGWRIGHT_REQUIRE_SANDBOXES`` names it (comma-separated, e.g. ``bubblewrap,docker``, as
CI sets it): then its tests fail, so a broken CI host cannot pass by skipping them.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from dagwright.sandbox import choice
from dagwright.sandbox.base import Sandbox
from dagwright.settings import Settings

BACKENDS = ("bubblewrap", "docker")
REQUIRE_ENV = "DAGWRIGHT_REQUIRE_SANDBOXES"


def required_backends() -> set[str]:
    """The backends whose tests must run (fail, not skip, when unavailable)."""
    return {name.strip() for name in os.environ.get(REQUIRE_ENV, "").split(",") if name.strip()}


@functools.cache
def probe(name: str) -> Sandbox | str:
    """The backend if its self-test passes here, else why not (once per session)."""
    return choice.probe(name, Settings())


def sandbox_or_skip(name: str) -> Sandbox:
    """The backend, or skip the test saying why (fail instead if it is required)."""
    found = probe(name)
    if not isinstance(found, str):
        return found
    if name in required_backends():
        pytest.fail(f"{REQUIRE_ENV} requires the {name} sandbox, which does not work: {found}")
    pytest.skip(f"sandbox backend unavailable: {found}")


def require_a_sandbox() -> Sandbox:
    """The first backend that works here; else skip the test saying why (fail instead
    if a required backend is among those that do not work)."""
    reasons = []
    for name in BACKENDS:
        found = probe(name)
        if not isinstance(found, str):
            return found
        if name in required_backends():
            pytest.fail(f"{REQUIRE_ENV} requires the {name} sandbox, which does not work: {found}")
        reasons.append(found)
    pytest.skip("no sandbox backend works here: " + "; ".join(reasons))


def marked_program(marker: str, seconds: float = 120) -> str:
    """Code that sleeps ``seconds`` as a process whose command line holds ``marker``, so
    the test can find it in the host's /proc (bubblewrap and docker processes alike)."""
    return (
        "import os\n"
        f"os.execv('/usr/bin/python3', ['python3', '-c', 'import time; time.sleep({seconds})',"
        f" {marker!r}])\n"
    )


def processes_marked(marker: str) -> list[int]:
    """Pids of the host's processes whose command line holds ``marker``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:  # gone meanwhile
            continue
    return found
