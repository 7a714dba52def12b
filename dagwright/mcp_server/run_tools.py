"""The tools on runs: submit, get, follow, list, result, cancel.

Each answers what the HTTP API answers for the same request (``json_views``), so a
client reads one shape whichever door it came in by. Reading needs the read scope (every
authenticated caller has it); submitting and cancelling need operate.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from dagwright.client import Client
from dagwright.client.handle import result_of
from dagwright.client.tokens import Scope
from dagwright.errors import DagwrightError, public_line
from dagwright.json_views import run_json
from dagwright.mcp_server.callers import require
from dagwright.mcp_server.calls import client_call
from dagwright.mcp_server.plan_files import PlanFiles
from dagwright.models import RunState, RunStatus

RunId = Annotated[str, Field(min_length=1, max_length=200, description="The run's id.")]

SUBMIT_DESCRIPTION = """Start a dagwright run: a DAG of tasks and LLM agents run by workers.

Give exactly one of `plan` (a plan document: `{"goal", "output", "nodes": [{"id", "type",
"depends_on", ...}]}`), `plan_file` (the name of a plan file the server offers: see
list_plan_files) or `goal` (free text that dagwright's planner turns into a plan).
Answers the run as get_run does (its `run_id`, status and nodes). A client that supports
MCP tasks gets a task that follows the run instead: it is input_required while a node
waits for approval, and its result is the run's result. Otherwise follow the run with
follow_run or get_run, and read the result with get_result. The same `idempotency_key`
again answers the run the first submit started."""


def register_run_tools(server: MCPServer, client: Client, plan_files: PlanFiles) -> None:
    """Add the run tools to ``server``, each over ``client``."""
    server.add_tool(submit_tool(client, plan_files), description=SUBMIT_DESCRIPTION)
    for tool in (*reading_tools(client), follow_tool(client), cancel_tool(client)):
        server.add_tool(tool)


def submit_tool(client: Client, plan_files: PlanFiles) -> Callable[..., Awaitable[Any]]:
    """``submit_run`` (its description: SUBMIT_DESCRIPTION)."""

    async def submit_run(
        ctx: Context,
        plan: Annotated[
            dict[str, Any] | None, Field(description="A plan document, as a plan file's JSON.")
        ] = None,
        plan_file: Annotated[
            str | None,
            Field(max_length=100, description="The name of a plan file the server offers."),
        ] = None,
        goal: Annotated[
            str | None, Field(max_length=20_000, description="A goal for the planner.")
        ] = None,
        context: Annotated[
            str, Field(max_length=100_000, description="Background the planner is given.")
        ] = "",
        inputs: Annotated[
            dict[str, Any] | None,
            Field(description="The run's inputs, checked against the plan's `inputs` schema."),
        ] = None,
        budget: Annotated[
            dict[str, Any] | None,
            Field(
                description="Caps on the run's LLM spend: max_input_tokens, "
                "max_output_tokens, max_total_tokens, max_cost_usd."
            ),
        ] = None,
        worker_types: Annotated[
            list[str] | None,
            Field(max_length=100, description="A goal's plan may use only these worker types."),
        ] = None,
        priority: Annotated[
            int | None, Field(ge=1, le=5, description="1 to 5, higher first (default 3).")
        ] = None,
        memory: Annotated[
            str | None,
            Field(
                max_length=63,
                description="The memory namespace the run's agents use (runs naming it "
                "share their memory); wins over the plan's `memory`.",
            ),
        ] = None,
        idempotency_key: Annotated[
            str | None,
            Field(max_length=512, description="The same key again answers the first run."),
        ] = None,
    ) -> dict[str, Any]:
        require(ctx, Scope.OPERATE)
        document = await chosen_plan(plan_files, plan, plan_file, goal)
        options: dict[str, Any] = {"context": context, "inputs": inputs, "budget": budget}
        options |= {"worker_types": worker_types, "priority": priority, "memory": memory}
        if goal is not None:
            options["goal"] = goal
        state = await client_call(submit_and_read, client, document, idempotency_key, options)
        return run_json(state)

    return submit_run


def reading_tools(client: Client) -> list[Callable[..., Awaitable[Any]]]:
    """``get_run``, ``list_runs`` and ``get_result``."""

    async def get_run(ctx: Context, run_id: RunId) -> dict[str, Any]:
        """The run: its status, counts, spend, result once it succeeded, and each node's
        status, output, error and what it waits on (`waiting`: approval, a worker, a
        rate limit, a retry...)."""
        return run_json(await client_call(client.status, run_id))

    async def list_runs(
        ctx: Context,
        status: Annotated[RunStatus | None, Field(description="Only runs of this status.")] = None,
        text: Annotated[
            str, Field(max_length=200, description="Only runs whose goal or id contains it.")
        ] = "",
        limit: Annotated[int, Field(ge=1, le=500, description="Runs per page.")] = 20,
        cursor: Annotated[
            str | None, Field(max_length=230, description="A page's next_cursor.")
        ] = None,
    ) -> dict[str, Any]:
        """Runs newest first, without their nodes, and the cursor of the next page."""
        page = await client_call(
            client.find_runs, status=status, text=text, limit=limit, cursor=cursor
        )
        runs = [summary_json(state) for state in page.runs]
        return {"runs": runs, "next_cursor": page.next_cursor}

    async def get_result(ctx: Context, run_id: RunId) -> dict[str, Any]:
        """The result of a succeeded run (its output node's output); an error that says
        why for a run that failed, was cancelled or still runs."""
        state = await client_call(client.status, run_id)
        try:
            return {"run_id": run_id, "result": result_of(state)}
        except DagwrightError as exc:  # failed, cancelled or unfinished: the CLI's line
            raise ToolError(public_line(exc)) from None

    return [get_run, list_runs, get_result]


def follow_tool(client: Client) -> Callable[..., Awaitable[Any]]:
    """``follow_run``: the run followed with progress notifications, for a client
    without MCP tasks."""

    async def follow_run(
        ctx: Context,
        run_id: RunId,
        wait_s: Annotated[
            float, Field(gt=0, le=3600, description="How long to follow, at most, in seconds.")
        ] = 60.0,
    ) -> dict[str, Any]:
        """Follow the run until it ends, a node waits for approval, or `wait_s` passes
        (at most the server's mcp_follow_max_s), with progress notifications (nodes done
        of all) meanwhile; answers the run as get_run does. Call again to go on."""
        deadline = time.monotonic() + min(wait_s, client.settings.mcp.follow_max_s)
        step_s = client.settings.mcp.task_poll_ms / 1000
        while True:
            state = await client_call(client.status, run_id, include_outputs=False)
            await ctx.report_progress(state.counts.done, state.counts.total, progress_line(state))
            if settled(state) or time.monotonic() >= deadline:
                return run_json(await client_call(client.status, run_id))
            await anyio.sleep(min(step_s, max(0.0, deadline - time.monotonic())))

    return follow_run


def cancel_tool(client: Client) -> Callable[..., Awaitable[Any]]:
    """``cancel_run``."""

    async def cancel_run(
        ctx: Context,
        run_id: RunId,
        reason: Annotated[
            str, Field(max_length=1000, description="Why, for the run's record.")
        ] = "cancelled by an MCP client",
    ) -> dict[str, Any]:
        """Cancel the run: no node starts any more, running ones are stopped; answers the
        run as it is now."""
        require(ctx, Scope.OPERATE)
        return run_json(await client_call(client.cancel, run_id, reason))

    return cancel_run


async def chosen_plan(
    plan_files: PlanFiles,
    plan: dict[str, Any] | None,
    plan_file: str | None,
    goal: str | None,
) -> Any:
    """The plan to submit (a document, a file's path, or None for a goal); exactly one of
    the three must be given."""
    choices = (("plan", plan), ("plan_file", plan_file), ("goal", goal))
    given = [name for name, value in choices if value is not None]
    if len(given) != 1:
        raise ToolError("give exactly one of plan, plan_file or goal")
    if plan_file is not None:
        return await client_call(plan_files.path, plan_file)
    return plan


def submit_and_read(
    client: Client, plan: Any, idempotency_key: str | None, options: dict[str, Any]
) -> RunState:
    """Submit the tool's RunRequest, then read the run: one trip to a worker thread for
    both."""
    given = {name: value for name, value in options.items() if value is not None}
    request = client.run_request(plan, caller="Client.submit", **given)
    handle = client.submit(request, idempotency_key=idempotency_key)
    return client.status(handle.run_id)


def summary_json(state: RunState) -> dict[str, Any]:
    """A run of a list: ``run_json`` without its nodes (as ``GET /runs``)."""
    return {key: value for key, value in run_json(state).items() if key != "nodes"}


def settled(state: RunState) -> bool:
    """The run ended, or waits for a person: following it further shows nothing new."""
    return state.status.is_final or state.counts.waiting_approval > 0


def progress_line(state: RunState) -> str:
    waiting = state.counts.waiting_approval
    line = f"{state.status.value}: {state.counts.done} of {state.counts.total} nodes done"
    return line + (f", {waiting} waiting for approval" if waiting else "")
