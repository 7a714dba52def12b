"""Approvals: what waits for a person, and the person's decision."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict

from dagwright.json_views import approval_json
from dagwright.server.auth import OPERATE, READ, Principal, client_of
from dagwright.server.blocking import in_thread
from dagwright.server.openapi import documented
from dagwright.server.resources import ApprovalRequest

router = APIRouter(tags=["approvals"])

Operator = Annotated[Principal, Depends(OPERATE)]


class ApproveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    args: dict[str, Any] | None = None
    """Replace the proposed arguments (a tool's input, or a node's params/instruction)."""
    note: str = ""


class RejectRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    reason: str = ""


@router.get(
    "/approvals",
    dependencies=[Depends(READ)],
    response_model=None,
    responses=documented(list[ApprovalRequest], 404, 422),
)
async def list_approvals(
    request: Request, run_id: Annotated[str | None, Query(min_length=1)] = None
) -> list[dict[str, Any]]:
    """Requests waiting for a person, oldest first (of one run, or all)."""
    approvals = await in_thread(client_of(request).approvals.list, run_id)
    return [approval_json(approval) for approval in approvals]


@router.post(
    "/runs/{run_id}/nodes/{node_id}/approve",
    response_model=None,
    responses=documented(
        ApprovalRequest, 400, 403, 404, 409, 413, 422, conflict="The node waits for no decision."
    ),
)
async def approve(
    run_id: str,
    node_id: str,
    request: Request,
    principal: Operator,
    body: ApproveRequest | None = None,
) -> dict[str, Any]:
    """Let the waiting node (or tool call) go on, with edited ``args`` if given."""
    body = body or ApproveRequest()
    approval = await in_thread(
        client_of(request).approvals.approve,
        run_id,
        node_id,
        comment=body.note,
        args=body.args,
        by=principal.name,
    )
    return approval_json(approval)


@router.post(
    "/runs/{run_id}/nodes/{node_id}/reject",
    response_model=None,
    responses=documented(
        ApprovalRequest, 400, 403, 404, 409, 413, 422, conflict="The node waits for no decision."
    ),
)
async def reject(
    run_id: str,
    node_id: str,
    request: Request,
    principal: Operator,
    body: RejectRequest | None = None,
) -> dict[str, Any]:
    """Refuse the waiting request: a rejected node fails (dead letter class policy)."""
    body = body or RejectRequest()
    approval = await in_thread(
        client_of(request).approvals.reject,
        run_id,
        node_id,
        comment=body.reason,
        by=principal.name,
    )
    return approval_json(approval)
