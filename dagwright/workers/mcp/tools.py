"""An MCP server's tool as a dagwright ``Tool``: the same policy, audit, breaker,
redaction and truncation as a built-in tool, only its schema and its call differ.

The model sees the server's own input schema (its ``title`` dropped, as for built-ins)
under the namespaced name (``names.py``). The arguments are passed as the model gave
them: the server validates them, and answers a bad call with an error result, which
the model reads as a refusal it can correct (as a ``ToolError``). A server that cannot
be reached fails the call (it counts against the tool's breaker, ``tool:<name>``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mcp_types import CallToolResult, EmbeddedResource, ImageContent, TextContent
from mcp_types import Tool as ServerTool
from pydantic import BaseModel, ConfigDict

from dagwright.errors import ToolError
from dagwright.settings import McpServerSettings
from dagwright.telemetry.spans import MCP_RESTART
from dagwright.workers.context import NodeContext
from dagwright.workers.mcp.names import namespaced
from dagwright.workers.mcp.pool import McpServers
from dagwright.workers.tools.base import Tool, is_tool_failure


class AnyArguments(BaseModel):
    """What an MCP tool is given: the model's arguments as they are (the server checks)."""

    model_config = ConfigDict(extra="allow")


def unused(**_: Any) -> None:  # an McpTool calls its server, not a function
    raise NotImplementedError


@dataclass(frozen=True)
class McpTool(Tool):
    """A tool of an MCP server."""

    server: str = ""
    server_tool: str = ""
    """Its name on the server (the model's name is namespaced)."""
    input_schema: dict[str, Any] = field(default_factory=dict)
    servers: McpServers | None = None

    def schema(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    def _guarded_call(self, ctx: NodeContext, kwargs: dict[str, Any]) -> Any:
        # Bounded by the server's own timeouts (the call's, a restart's), not a thread.
        return ctx.guard(
            f"tool:{self.name}", lambda: self._call_server(ctx, kwargs), is_failure=is_tool_failure
        )

    def _call_server(self, ctx: NodeContext, arguments: dict[str, Any]) -> Any:
        assert self.servers is not None
        result = self.servers.call(
            self.server,
            self.server_tool,
            arguments,
            restart_span=lambda: ctx.span(MCP_RESTART, server=self.server),
        )
        text = result_text(result)
        if result.is_error:  # the tool's answer to these arguments: the model's business
            raise ToolError(text)
        return text


def mcp_tool(
    server: str, config: McpServerSettings, listed: ServerTool, servers: McpServers
) -> McpTool:
    """The dagwright tool for ``listed``, a tool ``server`` lists."""
    name = namespaced(server, listed.name)
    description = listed.description or listed.title or listed.name
    return McpTool(
        name=name,
        description=f"{description}\n\n(Tool {listed.name!r} of the MCP server {server!r}.)",
        func=unused,
        args_model=AnyArguments,
        wants_ctx=False,
        timeout_s=config.timeout_s,
        max_output_chars=config.max_output_chars,
        carries_outside_content=True,  # a server's answer: delimited as untrusted data
        server=server,
        server_tool=listed.name,
        input_schema=input_schema(listed.input_schema),
        servers=servers,
    )


def input_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The server's schema as the Messages API takes it: an object, no title."""
    cleaned = {key: value for key, value in schema.items() if key not in ("title", "$schema")}
    cleaned["type"] = "object"
    return cleaned


def result_text(result: CallToolResult) -> str:
    """The result's content as text: text parts as they are, other parts described."""
    parts = [content_text(part) for part in result.content]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def content_text(part: Any) -> str:
    if isinstance(part, TextContent):
        return part.text
    if isinstance(part, ImageContent):
        return f"[an image ({part.mime_type}) the model cannot be shown here]"
    if isinstance(part, EmbeddedResource):
        resource = part.resource
        text = getattr(resource, "text", None)
        return text if isinstance(text, str) else f"[a binary resource: {resource.uri}]"
    return f"[{getattr(part, 'type', 'unknown')} content]"
