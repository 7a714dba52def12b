"""Attaching MCP servers to agent types, when the registry is built.

A type's servers are those its ``AgentSpec.mcp_servers`` names and those
``settings.mcp.agent_mcp[<type>].servers`` adds (built-in types included). Attaching offers
the servers' tools; it allows none of them: the type's policy decides, with the rules of
``agent_mcp[<type>].rules`` tried first. So ``servers = ["time"]`` alone gives the model
the time tools and every call of them is refused (and audited) until a rule such as
``{tool = "mcp__time__*", action = "allow"}`` lets it through.

The tools are listed when a node of the type runs (the first such node of a worker
process starts the server), not here: building a registry starts no process, and the
commands that only read (``status``, ``plan``) never do.

The ``mcp`` SDK is imported only once a type has a server: a deployment without MCP
never loads it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dagwright.errors import ConfigurationError, McpServerUnavailableError, MissingExtraError
from dagwright.models import Node
from dagwright.settings import AgentMcpSettings, McpServerSettings, Settings
from dagwright.workers.agent_spec import AgentSpec
from dagwright.workers.context import NodeContext
from dagwright.workers.registry import WorkerRegistry, WorkerType
from dagwright.workers.tools.base import Tool, ToolRegistry
from dagwright.workers.tools.policy import PolicyRule, ToolPolicy

if TYPE_CHECKING:
    from dagwright.workers.mcp.pool import McpServers


def attach_mcp_servers(registry: WorkerRegistry, settings: Settings) -> None:
    """Give each agent type the MCP servers the settings and its spec attach to it; one
    pool of servers for the process. ConfigurationError on a server or type unknown."""
    unknown_types = [name for name in settings.mcp.agent_mcp if name not in registry.type_names()]
    if unknown_types:
        raise ConfigurationError(
            f"agent_mcp names unknown worker type(s) {', '.join(sorted(unknown_types))}: "
            f"the agent types are {', '.join(agent_names(registry))}"
        )
    pool: McpServers | None = None
    for name in agent_names(registry):
        spec = attached_spec(registry, name, settings)
        if spec is None:
            continue
        if pool is None:
            try:
                from dagwright.workers.mcp.pool import McpServers
            except ImportError as exc:
                raise MissingExtraError.of(exc, f"agent type {name!r} (MCP servers)") from None
            pool = McpServers(settings.mcp.servers)
        registry.replace_type(mcp_agent_worker_type(registry.get(name), spec, registry.tools, pool))


def agent_names(registry: WorkerRegistry) -> list[str]:
    return [
        wt.name for wt in registry.types() if isinstance(registry.declaration(wt.name), AgentSpec)
    ]


def attached_spec(registry: WorkerRegistry, name: str, settings: Settings) -> AgentSpec | None:
    """The type's spec with its servers and their rules, None if it has no server."""
    spec = registry.declaration(name)
    assert isinstance(spec, AgentSpec)
    extra = settings.mcp.agent_mcp.get(name, AgentMcpSettings())
    servers = tuple(dict.fromkeys([*spec.mcp_servers, *extra.servers]))
    if not servers:
        return None
    unknown = [server for server in servers if server not in settings.mcp.servers]
    if unknown:
        raise ConfigurationError(
            f"agent type {name!r} names unknown MCP server(s) {', '.join(unknown)}: declare "
            "them under mcp_servers (dagwright.toml or DAGWRIGHT_MCP_SERVERS)"
        )
    rules = [PolicyRule.model_validate(rule.model_dump()) for rule in extra.rules]
    policy = ToolPolicy(rules=[*rules, *spec.policy.rules])
    return replace(spec, mcp_servers=servers, policy=policy)


def mcp_agent_worker_type(
    worker_type: WorkerType, spec: AgentSpec, tools: ToolRegistry, pool: McpServers
) -> WorkerType:
    """``worker_type`` running ``spec``'s agent with its servers' tools as well."""
    from dagwright.workers.agent_loop import run_agent

    def run(ctx: NodeContext, node: Node) -> Any:
        offered = server_tools(spec.mcp_servers, ctx.settings.mcp.servers, pool)
        equipped = replace(spec, tools=(*spec.tools, *(tool.name for tool in offered)))
        return run_agent(ctx, node, equipped, tools.extended(offered))

    return replace(worker_type, run=run, mcp_servers=spec.mcp_servers)


def server_tools(
    servers: tuple[str, ...], configs: dict[str, McpServerSettings], pool: McpServers
) -> list[Tool]:
    """The tools of ``servers``, each started if need be; McpServerUnavailableError (the
    node is retried later) if one does not start."""
    from dagwright.workers.mcp.connection import ServerGoneError
    from dagwright.workers.mcp.tools import mcp_tool

    offered: list[Tool] = []
    for server in servers:
        try:
            listed = pool.tools(server)
        except ServerGoneError as exc:
            raise McpServerUnavailableError(
                f"the MCP server {server!r} did not start: {exc} (`dagwright doctor` checks it)"
            ) from exc
        offered.extend(mcp_tool(server, configs[server], tool, pool) for tool in listed)
    return offered
