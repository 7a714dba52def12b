"""Whether each MCP server answers, and with which tools: for ``dagwright worker-types``
and ``dagwright doctor``. Each server is started (or connected to) as a worker would,
asked for its tools, and stopped again."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dagwright.redaction import redact
from dagwright.settings import McpServerSettings
from dagwright.workers.mcp.connection import ServerGoneError
from dagwright.workers.mcp.names import namespaced
from dagwright.workers.mcp.pool import McpServers


@dataclass(frozen=True)
class ServerProbe:
    """What one server said: its tools (namespaced), or why it did not answer."""

    server: str
    tools: list[str] = field(default_factory=list)
    problem: str = ""
    """Empty: it answered."""

    @property
    def answers(self) -> bool:
        return not self.problem

    def to_json(self) -> dict[str, object]:
        return {
            "server": self.server,
            "answers": self.answers,
            "tools": self.tools,
            "problem": self.problem,
        }


def probe_servers(
    configs: Mapping[str, McpServerSettings], servers: Iterable[str], secrets: tuple[str, ...]
) -> dict[str, ServerProbe]:
    """A probe of each of ``servers`` (its problem redacted with ``secrets``)."""
    with open(os.devnull, "w") as quiet:  # a server's log is not the command's output
        pool = McpServers(configs, errlog=quiet)
        try:
            return {server: probe_one(pool, server, secrets) for server in dict.fromkeys(servers)}
        finally:
            pool.close()


def probe_one(pool: McpServers, server: str, secrets: tuple[str, ...]) -> ServerProbe:
    try:
        listed = pool.tools(server)
    except ServerGoneError as exc:
        return ServerProbe(server, problem=redact(str(exc), secrets) or "it did not answer")
    return ServerProbe(server, tools=[namespaced(server, tool.name) for tool in listed])


def start_hint(server: str, config: McpServerSettings) -> str:
    """What to check when ``server`` does not answer."""
    if config.command is not None:
        command = " ".join([config.command, *config.args])
        needs = f"; that {', '.join(config.env)} are set" if config.env else ""
        return (
            f"check that `{command}` runs here (is it installed, on PATH?){needs}; or fix "
            f"mcp_servers.{server} in dagwright.toml"
        )
    needs = f" and that {', '.join(config.headers.values())} are set" if config.headers else ""
    return f"check that an MCP server listens at {config.url}{needs}; or fix mcp_servers.{server}"
