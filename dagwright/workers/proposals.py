"""Asking a person before acting: what worker code raises to wait for an approval.

A worker raises ``ApprovalNeeded`` at a point it can resume from (an agent, right after
checkpointing the model's tool call). The node then waits in WAITING_APPROVAL without a
worker slot; once someone decides, it is queued again, the worker resumes from its
checkpoint and finds the decision with ``NodeContext.approval()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from dagwright.models import Approval, ApprovalStatus


@dataclass(frozen=True)
class Proposal:
    """What the node proposes to do, as the approver sees it."""

    kind: Literal["node", "tool"]
    action: str
    args: dict[str, Any] = field(default_factory=dict)
    reasoning: str = ""
    tool_use_id: str | None = None


class ApprovalNeeded(Exception):  # a signal to wait, not an error
    """Stop here: the node waits for a person to decide on ``proposal``."""

    def __init__(self, proposal: Proposal) -> None:
        super().__init__(f"waiting for approval of {proposal.action}")
        self.proposal = proposal


def decided(approval: Approval | None, tool_use_id: str | None = None) -> Approval | None:
    """``approval`` if it is decided and is about ``tool_use_id`` (None: the node itself)."""
    if approval is None or approval.status == ApprovalStatus.PENDING:
        return None
    if approval.tool_use_id != tool_use_id:
        return None
    return approval
