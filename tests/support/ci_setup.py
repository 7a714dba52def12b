"""Waiting for CI's machine setup (.ci/machine-setup), which runs beside the README's
command: the tests start once its Debian packages, Docker engine, helm and bare install
are in place, or not at all if it failed."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

# A fresh machine's downloads and installs took minutes; past this, something hangs.
SETUP_TIMEOUT_S = 1200
SETUP_LOG = Path("/var/tmp/dagwright-ci-setup.log")


def wait_for_ci_setup() -> None:
    """Block until ``DAGWRIGHT_CI_SETUP_READY`` (set by .ci/run) names a status file
    holding 0; end the session with the setup log's tail if it holds anything else or
    never comes. Nothing to wait for outside CI."""
    ready = os.environ.get("DAGWRIGHT_CI_SETUP_READY")
    if not ready:
        return
    status = Path(ready)
    if not status.exists():
        print("waiting for CI's machine setup (.ci/machine-setup)...", file=sys.stderr, flush=True)
    deadline = time.monotonic() + SETUP_TIMEOUT_S
    while not status.exists():
        if time.monotonic() > deadline:
            pytest.exit(f"CI's machine setup took over {SETUP_TIMEOUT_S}s:\n{log_tail()}", 1)
        time.sleep(1)
    if status.read_text().strip() != "0":
        pytest.exit(f"CI's machine setup failed ({SETUP_LOG}):\n{log_tail()}", 1)


def log_tail() -> str:
    return SETUP_LOG.read_text(errors="replace")[-3000:] if SETUP_LOG.exists() else "(no log)"
