"""The MCP server's resources: what a client may read and attach to a conversation.

==========================================  ============================================
``dagwright://runs/{run_id}/result``        get_result's answer (JSON)
``dagwright://runs/{run_id}/trace``         the trace, as ``dagwright trace --format json``
``dagwright://runs/{run_id}/events``        the run's events, as ``dagwright events --json``
``dagwright://plans``                       the names of the plan files offered
``dagwright://plans/{name}``                a plan file's text (YAML or JSON)
``dagwright://worker-types``                the worker types, as list_worker_types
==========================================  ============================================

Every one is a read: any authenticated caller may (``/mcp`` lets no other in). A
DagwrightError is a resource error with the CLI's line (an unknown run: not found).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from dagwright.client import Client
from dagwright.client.handle import result_of
from dagwright.errors import DagwrightError, UnknownRunError, public_line
from dagwright.json_views import event_json
from dagwright.mcp_server.plan_files import PlanFiles
from dagwright.plans.documents import read_plan_text
from dagwright.plans.files import FILE_SIZE_SETTING

T = TypeVar("T")
JSON = "application/json"


async def resource_read(call: Callable[..., T], *args: Any) -> T:
    """``call(*args)`` in a worker thread; a DagwrightError as a resource error."""
    try:
        return await anyio.to_thread.run_sync(functools.partial(call, *args))
    except UnknownRunError as exc:
        raise ResourceNotFoundError(public_line(exc)) from None
    except DagwrightError as exc:
        raise ResourceError(public_line(exc)) from None


def register_resources(server: MCPServer, client: Client, plan_files: PlanFiles) -> None:
    """Add the run, plan-file and worker-type resources to ``server``, over ``client``."""

    @server.resource("dagwright://runs/{run_id}/result", mime_type=JSON)
    async def run_result(run_id: str) -> str:
        """The result of a succeeded run (an error for a failed, cancelled or running one)."""
        state = await resource_read(client.status, run_id)
        answer = await resource_read(result_of, state)
        return json.dumps({"run_id": run_id, "result": answer}, ensure_ascii=False)

    @server.resource("dagwright://runs/{run_id}/trace", mime_type=JSON)
    async def run_trace(run_id: str) -> str:
        """The run's trace: its spans (planning, nodes, LLM calls, tools) with timings."""
        trace = await resource_read(client.trace, run_id)
        return trace.model_dump_json()

    @server.resource("dagwright://runs/{run_id}/events", mime_type=JSON)
    async def run_events(run_id: str) -> str:
        """The run's events so far, oldest first (node started, finished, waiting...)."""
        events = await resource_read(lambda: list(client.events(run_id, follow=False)))
        return json.dumps([event_json(event) for event in events], ensure_ascii=False)

    @server.resource("dagwright://plans", mime_type=JSON)
    async def plan_names() -> str:
        """The names of the plan files submit_run takes as `plan_file`."""
        return json.dumps(await resource_read(plan_files.names))

    @server.resource("dagwright://plans/{name}", mime_type="text/plain")
    async def plan_file(name: str) -> str:
        """A plan file's text, as submit_run would read it."""
        path = await resource_read(plan_files.path, name)
        limit = client.settings.limits.max_plan_file_bytes
        return await resource_read(read_plan_text, path, limit, FILE_SIZE_SETTING)

    @server.resource("dagwright://worker-types", mime_type=JSON)
    async def worker_types() -> str:
        """Every registered worker type: kind, queue, model, tools, what it is for."""
        return json.dumps(await resource_read(client.worker_types), ensure_ascii=False)
