"""MCP: the servers agents may use, the rules on their tools, dagwright's own MCP server."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dagwright.settings.section import Section

MCP_SERVER_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,19}$"
"""Short, and without ``_``: ``mcp__<server>__<tool>`` must stay a valid, unambiguous tool
name of the Messages API (``^[a-zA-Z0-9_-]{1,64}$``)."""


class McpServerSettings(BaseModel):
    """One MCP server: a command started over stdio, or a streamable-HTTP ``url``.

    Secrets never sit here: ``env`` and ``headers`` name environment variables of the
    worker, whose values are passed to the server and masked in every trace, audit
    entry, dead letter and log (``dagwright.redaction``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: str | None = None
    """Executable of a stdio server (e.g. ``mcp-server-time``), found on ``PATH``."""
    args: list[str] = Field(default_factory=list)
    """Its command-line arguments."""
    cwd: Path | None = None
    """Its working directory (default: the worker's)."""
    env: list[str] = Field(default_factory=list)
    """Names of environment variables of the worker passed on to the server (it gets
    only these, beside ``PATH``, ``HOME`` and the like). Their values count as secrets."""
    url: str | None = None
    """Endpoint of a streamable-HTTP server (e.g. ``http://127.0.0.1:8000/mcp``)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers of a ``url`` server: header name -> name of the environment variable
    holding its value (e.g. ``{"Authorization": "GITHUB_MCP_AUTH"}``)."""
    timeout_s: float = Field(30.0, gt=0)
    """Longest one tool call may take."""
    startup_timeout_s: float = Field(20.0, gt=0)
    """Longest the server may take to start and answer ``initialize`` and ``tools/list``."""
    max_output_chars: int = Field(20_000, ge=100)
    """A tool result longer than this is cut before the model sees it."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (a stdio server) or `url` (streamable HTTP)")
        if self.headers and self.url is None:
            raise ValueError("`headers` are for a `url` server")
        return self

    def secret_values(self) -> list[str]:
        """The values of the environment variables it names, as this process has them."""
        names = [*self.env, *self.headers.values()]
        return [os.environ[name] for name in names if os.environ.get(name)]


class McpToolRule(BaseModel):
    """A policy rule on the MCP tools of an agent type (as ``PolicyRule``, for MCP tools
    only): tried before the type's own rules, first match wins, and a call no rule
    matches is denied."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    """Namespaced tool name or glob: ``mcp__time__*``, ``mcp__git__git_log``."""
    action: Literal["allow", "deny", "require_approval"]
    """What happens to a matching call."""
    when: dict[str, str] = Field(default_factory=dict)
    """Argument name -> glob its value must match (all of them)."""
    reason: str = ""
    """Why: shown to the model when the call is refused, and audited."""

    @field_validator("tool")
    @classmethod
    def _mcp_tools_only(cls, tool: str) -> str:
        # They cannot widen what a type may do with dagwright's own tools.
        if not tool.startswith("mcp__"):
            raise ValueError(
                f"rules of agent_mcp name MCP tools only (mcp__<server>__<tool> or a glob "
                f"such as mcp__time__*), not {tool!r}"
            )
        return tool


class AgentMcpSettings(BaseModel):
    """The MCP servers attached to one agent type, and the rules on their tools."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    servers: list[str] = Field(default_factory=list)
    """Names of ``mcp_servers`` whose tools the type is offered."""
    rules: list[McpToolRule] = Field(default_factory=list)
    """Policy rules on those tools. None: every call is denied (deny by default)."""


class McpSettings(Section):
    """MCP: the servers agents may use and the rules on their tools, and dagwright's own MCP
    server."""

    prefix: ClassVar[str] = "mcp_"
    flat_names: ClassVar[dict[str, str]] = {"agent_mcp": "agent_mcp"}

    plan_dir: Path | None = None
    """Directory whose plan files (``*.yaml``, ``*.yml``, ``*.json``) an MCP client may
    submit by name (``dagwright mcp`` and ``/mcp``: the ``plan_file`` of ``submit_run``).
    Unset: none may be, and no plan file is listed; only a file directly inside it, by a
    plain name, is read (no path, no link out of it)."""

    follow_max_s: float = Field(300.0, gt=0, le=3600)
    """Longest wait of one ``follow_run`` call of an MCP client, in seconds: it answers
    then with the run as it is (call it again to go on following)."""

    task_poll_ms: int = Field(1000, ge=100, le=60_000)
    """Polling interval the MCP server suggests to a client following a run as an MCP
    task (``pollIntervalMs``)."""

    servers: dict[str, McpServerSettings] = Field(default_factory=dict)
    """MCP servers by name (lowercase letters, digits, ``-``; 20 at most), e.g. in
    dagwright.toml ``[mcp_servers.time]`` ``command = "mcp-server-time"``. Each worker
    process starts a stdio server on first use and keeps it for every node after."""

    agent_mcp: dict[str, AgentMcpSettings] = Field(default_factory=dict)
    """MCP servers attached to agent types, by type name, with the policy rules on their
    tools: ``[agent_mcp.researcher]`` ``servers = ["time"]`` ``rules = [{tool =
    "mcp__time__*", action = "allow"}]``. Attaching offers the tools; only a rule lets a
    call through."""

    @field_validator("servers")
    @classmethod
    def _server_names(cls, servers: dict[str, McpServerSettings]) -> dict[str, McpServerSettings]:
        bad = sorted(name for name in servers if not re.fullmatch(MCP_SERVER_NAME_PATTERN, name))
        if bad:
            raise ValueError(
                f"MCP server names are 1-20 lowercase letters, digits or '-' (got {', '.join(bad)})"
            )
        return servers

    @model_validator(mode="after")
    def _known_mcp_servers(self) -> McpSettings:
        for agent, attached in self.agent_mcp.items():
            unknown = [name for name in attached.servers if name not in self.servers]
            if unknown:
                raise ValueError(
                    f"agent_mcp.{agent} names unknown MCP server(s) {', '.join(unknown)}: "
                    "declare them under mcp_servers"
                )
        return self
