"""Worker types and the registry that names them.

Built-in: the worker types ``function`` and ``python`` and the five agents, with their
functions and tools (``builtin_registry``). Users declare theirs without touching the
core, in a module named by ``DAGWRIGHT_IMPORTS`` / ``--import`` (``declarations.py``):

- ``@dagwright.function``: a function ``function`` nodes may call;
- ``@dagwright.tool``: a tool agents may be given;
- ``AgentSpec(...)`` bound to a module-level name: an LLM worker type;
- ``@dagwright.worker_type(name=..., description=...)``: a worker type in plain Python;
- or an entry point in the ``dagwright.workers`` group naming an AgentSpec, a WorkerType
  or a callable that receives the registry.

MCP servers' tools are attached to agent types from the settings (``workers/mcp/``).

The declarations register nothing: each process builds its registry once from its
settings (``dagwright.registry.build_registry``, which adds the planner, a layer above)
and hands it to what needs it.

The package imports none of its modules itself (PEP 562): ``dagwright.workers.budgets``
or ``.registry`` alone must not load the agent loop and, through it, the LLM layer and
Redis, which the CLI's read-only commands never use.
"""

from __future__ import annotations

from importlib import metadata
from typing import TYPE_CHECKING

from dagwright.errors import ConfigurationError
from dagwright.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from dagwright.workers.agent_loop import AgentSpec
    from dagwright.workers.context import NodeContext, NodeServices
    from dagwright.workers.declarations import (
        add_declared,
        declared_in,
        function,
        tool,
        worker_type,
    )
    from dagwright.workers.function_worker import FUNCTION_TYPE
    from dagwright.workers.registry import WorkerRegistry, WorkerType, import_user_modules

_LAZY = {
    "FUNCTION_TYPE": "dagwright.workers.function_worker",
    "AgentSpec": "dagwright.workers.agent_loop",
    "NodeContext": "dagwright.workers.context",
    "NodeServices": "dagwright.workers.context",
    "WorkerRegistry": "dagwright.workers.registry",
    "WorkerType": "dagwright.workers.registry",
    "add_declared": "dagwright.workers.declarations",
    "declared_in": "dagwright.workers.declarations",
    "function": "dagwright.workers.declarations",
    "import_user_modules": "dagwright.workers.registry",
    "tool": "dagwright.workers.declarations",
    "worker_type": "dagwright.workers.declarations",
}


__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


def builtin_registry() -> WorkerRegistry:
    """A new registry of dagwright's own functions, tools and worker types, without the
    planner (``dagwright.registry.build_registry`` adds it, and the user's declarations)."""
    from dagwright.workers.builtin_agents import agent_worker_type, builtin_agents
    from dagwright.workers.builtin_functions import register_builtins
    from dagwright.workers.function_worker import function_worker_type
    from dagwright.workers.python import python_worker_type
    from dagwright.workers.registry import WorkerRegistry
    from dagwright.workers.tools.builtin_tools import register_builtin_tools

    registry = WorkerRegistry()
    register_builtins(registry.functions)
    register_builtin_tools(registry.tools)
    registry.register_type(function_worker_type(registry.functions))
    registry.register_type(python_worker_type())
    for spec in builtin_agents():
        registry.register_type(agent_worker_type(spec, registry.tools), declared_by=spec)
    return registry


ENTRY_POINT_GROUP = "dagwright.workers"


def load_entry_points(registry: WorkerRegistry) -> None:
    """Apply the installed plugins to ``registry``: an entry point of the
    ``dagwright.workers`` group names an AgentSpec, a WorkerType, or a callable that
    receives the registry."""
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            apply_plugin(registry, entry_point.load())
        except Exception as exc:
            raise ConfigurationError(
                f"the {ENTRY_POINT_GROUP} entry point {entry_point.name!r} "
                f"({entry_point.value}) failed to load: {type(exc).__name__}: {exc}"
            ) from exc


def apply_plugin(registry: WorkerRegistry, plugin: object) -> None:
    from dagwright.workers.agent_loop import AgentSpec
    from dagwright.workers.declarations import add_agent
    from dagwright.workers.registry import WorkerType

    if isinstance(plugin, AgentSpec):
        add_agent(registry, plugin)
    elif isinstance(plugin, WorkerType):
        registry.register_type(plugin, declared_by=plugin)
    elif callable(plugin):
        plugin(registry)
    else:
        raise TypeError(
            f"it is a {type(plugin).__name__}: name an AgentSpec, a WorkerType or a callable"
        )


__all__ = [
    "FUNCTION_TYPE",
    "AgentSpec",
    "NodeContext",
    "NodeServices",
    "WorkerRegistry",
    "WorkerType",
    "add_declared",
    "builtin_registry",
    "declared_in",
    "function",
    "import_user_modules",
    "load_entry_points",
    "tool",
    "worker_type",
]
