"""``dagwright mcp``: dagwright's MCP server over stdio, for an MCP client's config
(Claude Desktop, Claude Code...). Its stdout is the protocol: nothing else is printed
there."""

from __future__ import annotations

import typer

from dagwright.cli.options import ImportOption, settings_from
from dagwright.errors import MissingExtraError


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp_command)


def mcp_command(imports: ImportOption = None) -> None:
    """Serve dagwright to an MCP client over stdio: submit plans and goals, follow runs,
    decide approvals, read results, replay dead letters (docs/mcp-server.md). The client
    starts it; it acts as you, with your settings."""
    settings = settings_from(imports)
    try:
        import anyio

        from dagwright.mcp_server.building import build_mcp_server
    except ImportError as exc:
        raise MissingExtraError.of(exc, "dagwright mcp") from None
    from dagwright.client import Client

    server = build_mcp_server(Client(settings))
    anyio.run(server.run_stdio_async)
