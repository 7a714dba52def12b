"""``client.approvals``: requests waiting for a person, and their decisions."""

from __future__ import annotations

import builtins
import getpass
from typing import TYPE_CHECKING, Any

from dagwright.client.redis_errors import SubClient
from dagwright.errors import UnknownNodeError
from dagwright.models import Approval
from dagwright.orchestrator.broker import dispatch
from dagwright.orchestrator.control.approvals import ApprovalBook

if TYPE_CHECKING:
    pass


class ApprovalClient(SubClient):
    """Approve or reject what a run's policy sent to a person (``client.approvals``)."""

    def list(self, run_id: str | None = None) -> builtins.list[Approval]:
        """Approval requests waiting for a person, oldest first (of one run, or all)."""
        runtime = self._client.runtime
        if run_id is not None:
            runtime.store.run_status(run_id)
        return ApprovalBook(runtime).pending(run_id)

    def approve(
        self,
        run_id: str,
        node_id: str,
        *,
        comment: str = "",
        args: dict[str, Any] | None = None,
        by: str | None = None,
    ) -> Approval:
        """Let the waiting node go on; ``args`` replace the proposed arguments (a tool's
        input, or a node's params/instruction/code). UnknownNodeError if the run has no such
        node, NotWaitingError if it waits for no decision."""
        return self._decide(run_id, node_id, approved=True, comment=comment, args=args, by=by)

    def reject(
        self, run_id: str, node_id: str, *, comment: str = "", by: str | None = None
    ) -> Approval:
        """Refuse the waiting request: a rejected tool call is reported to the agent,
        a rejected node fails (dead letter class ``policy``)."""
        return self._decide(run_id, node_id, approved=False, comment=comment, by=by)

    def _decide(
        self,
        run_id: str,
        node_id: str,
        *,
        approved: bool,
        comment: str,
        by: str | None,
        args: dict[str, Any] | None = None,
    ) -> Approval:
        runtime = self._client.runtime
        runtime.store.run_status(run_id)
        if runtime.store.node_records(run_id, node_id)[0] is None:
            raise UnknownNodeError(run_id, node_id)
        approval, ready = ApprovalBook(runtime).decide(
            run_id,
            node_id,
            approved=approved,
            by=by or getpass.getuser(),
            comment=comment,
            args=args,
        )
        dispatch(self._client.broker, runtime.machine, ready)
        return approval
