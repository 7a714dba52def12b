"""Which Python the bubblewrap sandbox runs code with, and the host trees it needs.

``system`` (the default): the host's ``python3`` under /usr, the only host directory the
sandbox sees: the standard library only, whatever the worker has installed. ``worker``
(``sandbox_python = "worker"``): the worker's own interpreter, with its virtualenv (and the
base installation it comes from, when that is outside /usr) mounted read-only at the same
paths, so code can import what the worker's environment has (numpy, pandas...). Nothing
else of the host comes with it: no network, no environment variables, the same limits.
What a virtualenv holds is code the worker's owner installed, not secrets; a package
installed in editable mode from a directory outside the environment is not mounted.

The trees are mounted from descriptors root opens (``--ro-bind-fd``): bwrap itself runs as
the sandbox uid, which may not traverse the directories above them (a virtualenv under
root's 0700 home). Rejected: mounting only ``site-packages`` with ``PYTHONPATH`` (a
virtualenv's interpreter finds its packages by its ``pyvenv.cfg``; PYTHONPATH would put
them before the standard library).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")


@dataclass(frozen=True)
class SandboxPython:
    """An interpreter for the sandbox and the host trees (outside /usr, which is always
    mounted) it needs, each mounted read-only at the same path."""

    executable: str
    trees: tuple[str, ...] = ()

    def reachable(self) -> bool:
        """Whether the interpreter is inside what the sandbox sees."""
        return any(self.executable.startswith(root + "/") for root in ("/usr", *self.trees))


def system_python() -> SandboxPython:
    """The host's own python3 (a venv's interpreter lives outside /usr: not visible)."""
    return SandboxPython(next((p for p in SYSTEM_PYTHONS if os.path.exists(p)), SYSTEM_PYTHONS[0]))


def worker_python() -> SandboxPython:
    """This process's interpreter, with its environment and base installation."""
    trees = [
        prefix
        for prefix in dict.fromkeys((sys.prefix, sys.base_prefix))
        if not (prefix == "/usr" or prefix.startswith("/usr/"))
    ]
    return SandboxPython(sys.executable, tuple(trees))


def sandbox_python(choice: str) -> SandboxPython:
    """``sandbox_python``'s interpreter: ``system`` or ``worker``."""
    return worker_python() if choice == "worker" else system_python()
