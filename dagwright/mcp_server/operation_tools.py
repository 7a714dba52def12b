"""The tools around runs: approvals, dead letters, worker types and plan files.

Scopes as the HTTP API's: listing needs read; deciding an approval and replaying a dead
letter need operate (``client.tokens.Scope``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from dagwright.client import Client
from dagwright.client.tokens import Scope
from dagwright.dlq import Classification, DeadLetterStatus
from dagwright.json_views import approval_json, letter_json
from dagwright.mcp_server.callers import require
from dagwright.mcp_server.calls import client_call
from dagwright.mcp_server.plan_files import PlanFiles

RunId = Annotated[str, Field(min_length=1, max_length=200, description="The run's id.")]


def register_operation_tools(server: MCPServer, client: Client, plan_files: PlanFiles) -> None:
    """Add the approval, dead-letter and catalog tools to ``server``, over ``client``."""

    async def list_approvals(
        ctx: Context,
        run_id: Annotated[
            str | None, Field(max_length=200, description="Only this run's (default: all).")
        ] = None,
    ) -> list[dict[str, Any]]:
        """Requests waiting for a person's decision, oldest first: a node marked
        `approval: required` about to run, or an agent's tool call its policy holds. Each
        says what would run (`action`, `args`) and until when it waits (`deadline`)."""
        approvals = await client_call(client.approvals.list, run_id or None)
        return [approval_json(approval) for approval in approvals]

    async def decide_approval(
        ctx: Context,
        run_id: RunId,
        node_id: Annotated[str, Field(min_length=1, max_length=200, description="The node.")],
        decision: Annotated[
            Literal["approve", "reject"], Field(description="Let it go on, or refuse it.")
        ],
        note: Annotated[
            str, Field(max_length=2000, description="Why: kept with the decision.")
        ] = "",
        args: Annotated[
            dict[str, Any] | None,
            Field(description="Approve with these arguments instead of the proposed ones."),
        ] = None,
    ) -> dict[str, Any]:
        """Decide a waiting request: approve (with edited `args` if given) or reject (the
        node then fails, dead letter class policy). Answers the decided request."""
        caller = require(ctx, Scope.OPERATE)
        if decision == "approve":
            approval = await client_call(
                client.approvals.approve, run_id, node_id, comment=note, args=args, by=caller.name
            )
        else:
            approval = await client_call(
                client.approvals.reject, run_id, node_id, comment=note, by=caller.name
            )
        return approval_json(approval)

    async def list_dead_letters(
        ctx: Context,
        run_id: Annotated[str | None, Field(max_length=200, description="Only this run's.")] = None,
        worker_type: Annotated[
            str | None, Field(max_length=100, description="Only this worker type's.")
        ] = None,
        classification: Annotated[
            Classification | None, Field(description="Only this classification.")
        ] = None,
        status: Annotated[DeadLetterStatus | None, Field(description="Only this status.")] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="At most this many.")] = 50,
    ) -> list[dict[str, Any]]:
        """Nodes that failed for good, newest first: run, node, worker type, error class
        and message, classification (transient, permanent, budget, policy), attempts."""
        letters = await client_call(
            client.dlq.list,
            run_id=run_id,
            worker_type=worker_type,
            classification=classification,
            status=status,
            limit=limit,
        )
        return [letter_json(letter, full=False) for letter in letters]

    async def replay_dead_letter(
        ctx: Context,
        entry_id: Annotated[
            str, Field(min_length=1, max_length=100, description="The dead letter's id.")
        ],
        fresh: Annotated[
            bool, Field(description="Start an agent's conversation over, not from its checkpoint.")
        ] = False,
    ) -> dict[str, Any]:
        """Run the failed node again, re-opening its run and reusing every node that
        succeeded (no token spent twice); say why if it cannot be replayed."""
        require(ctx, Scope.OPERATE)
        result = await client_call(client.dlq.replay, entry_id, fresh=fresh)
        return result.to_json()

    async def list_worker_types(ctx: Context) -> list[dict[str, Any]]:
        """Every registered worker type: its kind (agent, function, python...), queue,
        model, tools, and what it is for; what a plan's nodes may use."""
        return await client_call(client.worker_types)

    async def list_plan_files(ctx: Context) -> list[str]:
        """The names of the plan files submit_run takes as `plan_file` (none unless the
        server's mcp_plan_dir is set)."""
        return await client_call(plan_files.names)

    for tool in (
        list_approvals,
        decide_approval,
        list_dead_letters,
        replay_dead_letter,
        list_worker_types,
        list_plan_files,
    ):
        server.add_tool(tool)
