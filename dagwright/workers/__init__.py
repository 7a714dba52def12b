"""Worker types and the registry that names them.

``default_registry`` holds the built-in worker types and functions; ``@function``
registers a user's function into it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

from dagwright.workers.builtins import register_builtins
from dagwright.workers.context import NodeContext
from dagwright.workers.function import FUNCTION_TYPE, function_worker_type
from dagwright.workers.registry import WorkerRegistry, WorkerType, import_user_modules

F = TypeVar("F", bound=Callable[..., Any])


def build_default_registry() -> WorkerRegistry:
    registry = WorkerRegistry()
    register_builtins(registry.functions)
    registry.register_type(function_worker_type(registry.functions))
    return registry


default_registry = build_default_registry()


@overload
def function(func: F, /) -> F: ...


@overload
def function(
    *, name: str | None = None, registry: WorkerRegistry | None = None
) -> Callable[[F], F]: ...


def function(
    func: F | None = None, /, *, name: str | None = None, registry: WorkerRegistry | None = None
) -> F | Callable[[F], F]:
    """Register a function that ``function`` nodes can call by name.

    Usable bare (``@function``) or with a name (``@function(name="fetch")``).
    """

    def register(target: F) -> F:
        (registry or default_registry).functions.register(target, name)
        return target

    return register(func) if func is not None else register


__all__ = [
    "FUNCTION_TYPE",
    "NodeContext",
    "WorkerRegistry",
    "WorkerType",
    "default_registry",
    "function",
    "import_user_modules",
]
