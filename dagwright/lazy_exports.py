"""Names a package exports but imports on first use (PEP 562).

``import dagwright`` (and ``dagwright.cli``, ``dagwright.client``...) must stay cheap: a
script that builds plans, or ``dagwright status``, should not pay for Redis, the agent loop
or Celery. A package lists what it exports and where each name lives; the first lookup
imports that module and keeps the value in the package's namespace, so later lookups are
plain attribute reads.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_exports(
    package: str, namespace: dict[str, Any], homes: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose ``homes`` map each lazily
    exported name to the module that defines it."""

    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(homes[name]), name)
        namespace[name] = value  # looked up once
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__
