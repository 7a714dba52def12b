"""The registry of a process, built once from its settings and handed to what needs it.

``build_registry(settings)`` is the one place that assembles it: dagwright's built-in
functions, tools and worker types, the internal ``planner`` type, the ``celery_task``
type (which needs the settings' ``celery_app``), the declarations of the
modules named by ``settings.process.imports`` (``DAGWRIGHT_IMPORTS`` / ``--import``) and the
installed ``dagwright.workers`` entry points, the memory tool and skills given to agent
types (``settings.memory.agent_memory``, ``settings.skills.agent_skills``) and the MCP
servers attached to them (``settings.mcp.agent_mcp``, ``AgentSpec.mcp_servers``).
``Runtime.registry`` calls it
on first use (so workers, the client, schedules and the reconciler share the
runtime's, and read-only commands such as ``status`` never build one); commands that need
no Redis (``worker-types``, ``plan``, the metrics server) call it themselves.

It lives here, not in ``dagwright.workers``, because the planner (``dagwright.planning``)
sits above the workers: it validates plans, which name worker types.
"""

from __future__ import annotations

from dagwright.planning.planner import planner_worker_type
from dagwright.settings import Settings
from dagwright.workers import (
    WorkerRegistry,
    add_declared,
    builtin_registry,
    declared_in,
    import_user_modules,
    load_entry_points,
)
from dagwright.workers.mcp.attach import attach_mcp_servers
from dagwright.workers.memory_attach import attach_memory
from dagwright.workers.skills_attach import attach_skills
from dagwright.workers.team_tasks import celery_task_worker_type


def build_registry(settings: Settings) -> WorkerRegistry:
    """A new registry: the built-ins, the planner, the user's modules, the entry points.
    ConfigurationError (one line, saying what to change) on a module that fails to
    import, two declarations of one name, an agent naming an unknown tool, or a bad
    entry point."""
    registry = builtin_registry()
    registry.register_type(planner_worker_type(registry))
    registry.register_type(celery_task_worker_type(settings))
    for module in import_user_modules(settings.process.imports):
        add_declared(registry, declared_in(module))
    load_entry_points(registry)
    attach_memory(registry, settings)
    attach_skills(registry, settings)
    attach_mcp_servers(registry, settings)
    return registry
