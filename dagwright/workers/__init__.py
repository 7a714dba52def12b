"""Worker types and the registry that names them.

``default_registry`` holds the built-in worker types (``function``, ``python`` and the five
agents),
functions and tools. Users add theirs without touching the core:

- ``@dagwright.function``: a function ``function`` nodes may call;
- ``@dagwright.tool``: a tool agents may be given;
- ``dagwright.register_agent(AgentSpec(...))``: an LLM worker type;
- ``@dagwright.worker_type(name=..., description=...)``: a worker type in plain Python;
- or an entry point in the ``dagwright.workers`` group naming an AgentSpec, a WorkerType
  or a callable that receives the registry, loaded by every worker and client.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata
from typing import Any, TypeVar, overload

from dagwright.errors import ConfigurationError
from dagwright.workers.agent_loop import AgentSpec
from dagwright.workers.builtin_agents import agent_worker_type, builtin_agents
from dagwright.workers.builtin_functions import register_builtins
from dagwright.workers.context import NodeContext, NodeServices
from dagwright.workers.function_worker import FUNCTION_TYPE, function_worker_type
from dagwright.workers.python import python_worker_type
from dagwright.workers.registry import WorkerRegistry, WorkerType, import_user_modules
from dagwright.workers.tools.builtin_tools import register_builtin_tools

F = TypeVar("F", bound=Callable[..., Any])


def build_default_registry() -> WorkerRegistry:
    registry = WorkerRegistry()
    register_builtins(registry.functions)
    register_builtin_tools(registry.tools)
    registry.register_type(function_worker_type(registry.functions))
    registry.register_type(python_worker_type())
    for spec in builtin_agents():
        registry.register_type(agent_worker_type(spec, registry.tools))
    return registry


default_registry = build_default_registry()


ENTRY_POINT_GROUP = "dagwright.workers"


def load_entry_points(registry: WorkerRegistry) -> None:
    """Apply the installed plugins to ``registry``, once each: an entry point of the
    ``dagwright.workers`` group names an AgentSpec, a WorkerType, or a callable that
    receives the registry."""
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry_point.value in registry.loaded_plugins:
            continue
        registry.loaded_plugins.add(entry_point.value)
        try:
            plugin = entry_point.load()
            if isinstance(plugin, AgentSpec):
                register_agent(plugin, registry=registry, replace=True)
            elif isinstance(plugin, WorkerType):
                registry.register_type(plugin, replace=True)
            else:
                plugin(registry)
        except Exception as exc:
            raise ConfigurationError(
                f"the {ENTRY_POINT_GROUP} entry point {entry_point.name!r} "
                f"({entry_point.value}) failed to load: {type(exc).__name__}: {exc}"
            ) from exc


def load_plugins(modules: list[str]) -> None:
    """What every worker and client does at start-up: import the user's modules
    (``DAGWRIGHT_IMPORTS`` / ``--import``) and the installed ``dagwright.workers`` entry
    points, so both know the same functions, tools and worker types."""
    import_user_modules(modules)
    load_entry_points(default_registry)


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


@overload
def tool(func: F, /) -> F: ...


@overload
def tool(
    *,
    name: str | None = None,
    timeout_s: float = 30.0,
    max_output_chars: int = 20_000,
    registry: WorkerRegistry | None = None,
) -> Callable[[F], F]: ...


def tool(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    timeout_s: float = 30.0,
    max_output_chars: int = 20_000,
    registry: WorkerRegistry | None = None,
) -> F | Callable[[F], F]:
    """Register a tool agents may be given (its docstring's first line describes it)."""

    def register(target: F) -> F:
        (registry or default_registry).tools.register(
            target, name=name, timeout_s=timeout_s, max_output_chars=max_output_chars
        )
        return target

    return register(func) if func is not None else register


def register_agent(
    spec: AgentSpec, *, registry: WorkerRegistry | None = None, replace: bool = False
) -> WorkerType:
    """Register an LLM worker type (its queue is ``dw.<name>``)."""
    target = registry or default_registry
    unknown = [name for name in spec.tools if target.tools.get(name) is None]
    if unknown:
        raise ValueError(
            f"agent type {spec.name!r} names unregistered tool(s) {', '.join(unknown)}: "
            f"register them first; registered: {', '.join(target.tools.names())}"
        )
    return target.register_type(agent_worker_type(spec, target.tools), replace=replace)


def worker_type(
    *, name: str, description: str, registry: WorkerRegistry | None = None
) -> Callable[[Callable[[NodeContext, Any], Any]], Callable[[NodeContext, Any], Any]]:
    """Register a worker type written in Python: ``def run(ctx, node) -> output``."""

    def register(run: Callable[[NodeContext, Any], Any]) -> Callable[[NodeContext, Any], Any]:
        (registry or default_registry).register_type(
            WorkerType(name=name, kind="custom", description=description, run=run)
        )
        return run

    return register


__all__ = [
    "FUNCTION_TYPE",
    "AgentSpec",
    "NodeContext",
    "NodeServices",
    "WorkerRegistry",
    "WorkerType",
    "default_registry",
    "function",
    "import_user_modules",
    "load_entry_points",
    "load_plugins",
    "register_agent",
    "tool",
    "worker_type",
]
