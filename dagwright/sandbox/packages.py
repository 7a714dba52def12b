"""The packages sandboxed code may import: installed ahead of time, never by the code.

``sandbox_packages`` names them (requirement specifiers of the package index). For the
bubblewrap backend, ``dagwright sandbox install`` (:func:`install_packages`) builds a
virtualenv of the sandbox's own interpreter (the host's ``python3``, so compiled wheels
match it) at ``sandbox_packages_dir``, and pip, run by the worker's interpreter with
``--python``, installs the list into it from the index this machine's pip is configured
with. The backend then runs code with that virtualenv's interpreter, the virtualenv bound
read-only at its own path (:func:`packages_python`): a root worker whose data directory is
under a 0700 home reaches it through ``private_mounts.py``, and every file is made
readable by every uid. For the docker backend the image holds the packages (the
``SANDBOX_PACKAGES`` build argument of ``ops/docker/sandbox.Dockerfile``).

The install is explicit and bounded: a command a person runs (never at worker start, so a
worker never reaches the network on its own), ``sandbox_install_timeout_s``, built aside
and renamed into place (a running worker sees the old virtualenv or the new one, whole).
Rejected: ``pip --target`` with PYTHONPATH (it would put the packages before the standard
library); installing into the worker's own environment (``sandbox_python = "worker"``
already offers that, with everything the worker has).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

from dagwright.errors import ConfigurationError
from dagwright.sandbox.interpreters import SandboxPython, system_python
from dagwright.settings import SandboxSettings

PIP_OPTIONS = ("--no-input", "--disable-pip-version-check", "--no-cache-dir")


def venv_python(directory: Path) -> Path:
    return directory / "bin" / "python3"


def packages_python(sandbox: SandboxSettings) -> SandboxPython | None:
    """The installed packages' interpreter and tree, or None if none is installed."""
    directory = sandbox.packages_dir
    if not sandbox.packages or not venv_python(directory).exists():
        return None
    return SandboxPython(str(venv_python(directory)), (str(directory),))


def install_packages(sandbox: SandboxSettings, timeout_s: float) -> Path:
    """Build the packages' virtualenv anew and put it in place; ConfigurationError saying
    what failed (pip's last lines) if it cannot."""
    if not sandbox.packages:
        raise ConfigurationError("sandbox_packages is empty: name the packages to install")
    target = sandbox.packages_dir
    target.parent.mkdir(parents=True, exist_ok=True)
    aside = target.with_name(f".{target.name}-{uuid.uuid4().hex[:8]}")
    try:
        _build(aside, sandbox.packages, timeout_s)
        _make_readable(aside)
        _replace(target, aside)
    finally:
        shutil.rmtree(aside, ignore_errors=True)
    return target


def _build(directory: Path, packages: Sequence[str], timeout_s: float) -> None:
    base = system_python().executable
    _run([base, "-m", "venv", "--without-pip", str(directory)], timeout_s, "creating the venv")
    pip = [sys.executable, "-m", "pip", *PIP_OPTIONS, "--python", str(venv_python(directory))]
    _run([*pip, "install", "--progress-bar=off", *packages], timeout_s, "pip install")


def _run(command: list[str], timeout_s: float, what: str) -> None:
    old_umask = os.umask(0o022)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ConfigurationError(
            f"sandbox install: {what} took longer than {timeout_s:g}s (sandbox_install_timeout_s)"
        ) from None
    except OSError as exc:
        raise ConfigurationError(f"sandbox install: {what} could not start: {exc}") from exc
    finally:
        os.umask(old_umask)
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise ConfigurationError(f"sandbox install: {what} failed: {tail}")


def _make_readable(directory: Path) -> None:
    """Every file readable, every directory enterable, by every uid (the sandbox's)."""
    for root, dirs, files in os.walk(directory):
        for name in dirs:
            path = Path(root) / name
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o555)
        for name in files:
            path = Path(root) / name
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o444)
    directory.chmod(directory.stat().st_mode | 0o555)


def _replace(target: Path, built: Path) -> None:
    """Rename ``built`` onto ``target``; the old tree, if any, is moved away first."""
    old = target.with_name(f".{target.name}-old-{uuid.uuid4().hex[:8]}")
    if target.exists():
        target.rename(old)
    built.rename(target)
    shutil.rmtree(old, ignore_errors=True)
