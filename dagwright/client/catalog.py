"""The worker types as ``dagwright worker-types --json`` and ``GET /api/v1/worker-types``
show them: kind, queue, model, tools (those of attached MCP servers that answered too),
skills,
and for ``function`` the queues of functions declared with their own (``function_queues``:
Celery queue -> the functions on it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dagwright.keys import function_queue
from dagwright.settings import Settings

if TYPE_CHECKING:
    from dagwright.workers import WorkerType
    from dagwright.workers.mcp.probe import ServerProbe


def describe_worker_types(settings: Settings) -> list[dict[str, Any]]:
    """Every registered worker type (the MCP servers attached to agent types are started
    to list their tools, and stopped)."""
    from dagwright.registry import build_registry

    registry = build_registry(settings)
    worker_types = registry.types()
    probes = probe_attached_servers(settings, worker_types)
    function_queues = {
        function_queue(queue): functions for queue, functions in registry.functions.queues().items()
    }
    return [
        {
            **describe(worker_type, settings, probes),
            "function_queues": function_queues if worker_type.kind == "function" else {},
        }
        for worker_type in worker_types
    ]


def describe(
    worker_type: WorkerType, settings: Settings, probes: dict[str, ServerProbe] | None = None
) -> dict[str, Any]:
    """A type as ``worker-types`` shows it; ``tools`` with the tools of its MCP servers
    that answered, ``mcp_servers`` saying which did and what each offers."""
    model = worker_type.model or (
        settings.llm.default_model if worker_type.kind == "agent" else None
    )
    servers = [(probes or {})[server] for server in worker_type.mcp_servers]
    mcp_tools = [tool for server in servers for tool in server.tools]
    capabilities = worker_type.capabilities(settings) if worker_type.capabilities else None
    return {
        "name": worker_type.name,
        "kind": worker_type.kind,
        "queue": worker_type.queue,
        "model": model,
        "tools": [*worker_type.tools, *mcp_tools],
        "not_offered": not_offered(worker_type.tools, capabilities),
        "capabilities": capabilities,
        "mcp_servers": [server.to_json() for server in servers],
        "skills": list(worker_type.skills),
        "description": worker_type.description,
    }


def not_offered(tools: tuple[str, ...], capabilities: list[str] | None) -> list[str]:
    """The tools a type declares that this deployment does not offer its model (``http_get``
    without allowed domains, ``web_search`` turned off): its capability lines name the
    offered ones first (``name: what it does``)."""
    if capabilities is None:
        return []
    return [tool for tool in tools if not any(line.startswith(f"{tool}:") for line in capabilities)]


def probe_attached_servers(
    settings: Settings, worker_types: list[WorkerType]
) -> dict[str, ServerProbe]:
    """Each MCP server some type has, asked for its tools (none: the SDK is not loaded)."""
    attached = [server for worker_type in worker_types for server in worker_type.mcp_servers]
    if not attached:
        return {}
    from dagwright.redaction import known_secrets
    from dagwright.workers.mcp.probe import probe_servers

    return probe_servers(settings.mcp.servers, attached, known_secrets(settings))
