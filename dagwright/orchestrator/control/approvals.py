"""Approvals: nodes waiting for a person, and the decisions that let them go on.

A node asks (``ApprovalNeeded`` from its worker, or ``approval: required`` in its plan)
and waits in WAITING_APPROVAL with no lease and no worker slot. A decision (``approve``,
``reject``, or the reconciler when ``approval_timeout_s`` passes) is stored next to the
request and queues the node again; its worker resumes from its checkpoint and acts on it.
Every request and decision goes to the run's audit stream.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from dagwright.errors import ApprovalError, ApprovalRejectedError, InputError, NotWaitingError
from dagwright.models import Approval, ApprovalDecision, ApprovalStatus, Node, from_ms
from dagwright.orchestrator.runstate.machine import LeaseRef, ReadyNode
from dagwright.orchestrator.runtime import Runtime
from dagwright.shown_ids import shown_id
from dagwright.workers.context import NodeContext
from dagwright.workers.proposals import ApprovalNeeded, Proposal, decided

TIMEOUT_DECIDER = "dagwright"
EDITABLE_NODE_FIELDS = {"params": dict, "instruction": str, "code": str}
AUDITED_CHARS = 500


class ApprovalBook:
    """Approval requests and decisions, over one runtime's Redis."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def request(self, ctx: NodeContext, proposal: Proposal, timeout_s: float) -> bool:
        """Park the node until someone decides on ``proposal``; False if the node is no
        longer this worker's."""
        now_ms = self.runtime.store.server_time_ms()
        deadline_ms = now_ms + int(timeout_s * 1000)
        approval = Approval(
            id=uuid.uuid4().hex[:12],
            run_id=ctx.run_id,
            node=ctx.node_id,
            kind=proposal.kind,
            action=proposal.action,
            args=proposal.args,
            reasoning=proposal.reasoning,
            tool_use_id=proposal.tool_use_id,
            attempt=ctx.attempt,
            requested_at=from_ms(now_ms),
            deadline=from_ms(deadline_ms),
        )
        return self.runtime.machine.await_approval(
            LeaseRef(ctx.run_id, ctx.node_id, ctx.fence),
            request_json=approval.model_dump_json(exclude={"decision"}),
            deadline_ms=deadline_ms,
            audit=audit_entry(approval, "approval_requested", reason=proposal.reasoning),
        )

    def read(self, run_id: str, node_id: str) -> Approval | None:
        """The node's latest request, with its decision if there is one."""
        request, decision = self.runtime.client.hmget(
            self.runtime.keys.run_key(run_id, "approvals"), approval_fields(node_id)
        )
        return parse_approval(request, decision)

    def pending(self, run_id: str | None = None) -> list[Approval]:
        """Requests waiting for a decision, oldest first (of one run, or of every run)."""
        client, keys = self.runtime.client, self.runtime.keys
        members = [
            member
            for member in client.zrange(keys.pending_approvals, 0, -1)
            if run_id is None or member.startswith(f"{run_id}/")
        ]
        pipe = client.pipeline(transaction=False)  # one round trip for them all
        for member in members:
            member_run, _, node_id = member.partition("/")
            pipe.hmget(keys.run_key(member_run, "approvals"), approval_fields(node_id))
            pipe.hget(keys.run_key(member_run, "state"), node_id)
        replies = pipe.execute()
        waiting: list[Approval] = []
        gone: list[str] = []  # their runs ended or were cancelled
        for member, fields, state in zip(members, replies[::2], replies[1::2], strict=True):
            approval = parse_approval(*fields)
            if state == "running":  # indexed just before it waits (machine.await_approval)
                continue
            if approval is None or approval.decision is not None or state != "waiting_approval":
                gone.append(member)
            else:
                waiting.append(approval)
        if gone:
            client.zrem(keys.pending_approvals, *gone)
        return sorted(waiting, key=lambda approval: approval.requested_at)

    def decide(
        self,
        run_id: str,
        node_id: str,
        *,
        approved: bool,
        by: str,
        comment: str = "",
        args: dict[str, Any] | None = None,
    ) -> tuple[Approval, list[ReadyNode]]:
        """Approve (optionally with edited ``args``) or reject the waiting request of the
        node: the decided approval, and the nodes to publish. NotWaitingError if none waits."""
        approval = self.read(run_id, node_id)
        if approval is None or approval.decision is not None:
            raise NotWaitingError(
                f"{shown_id(run_id)}/{shown_id(node_id)} is not waiting for an approval "
                "(see `dagwright approvals list`)"
            )
        if args is not None:
            check_edited_args(approval, args, approved=approved)
        return self._record(approval, approved=approved, by=by, comment=comment, args=args)

    def _record(
        self,
        approval: Approval,
        *,
        approved: bool,
        by: str,
        comment: str,
        args: dict[str, Any] | None = None,
    ) -> tuple[Approval, list[ReadyNode]]:
        decision = ApprovalDecision(
            status=ApprovalStatus.APPROVED if approved else ApprovalStatus.REJECTED,
            by=by,
            at=from_ms(self.runtime.store.server_time_ms()),
            comment=comment,
            args=args,
        )
        decided_approval = approval.model_copy(update={"decision": decision})
        outcome = self.runtime.machine.decide_approval(
            approval.run_id,
            approval.node,
            approval_id=approval.id,
            approved=approved,
            decision_json=decision.model_dump_json(),
            audit=audit_entry(
                decided_approval,
                decision.status.value,
                reason=comment or ("" if approved else f"rejected by {by}, with no comment"),
                by=by,
                args=args,
            ),
        )
        if isinstance(outcome, str):
            raise NotWaitingError(
                f"{approval.run_id}/{approval.node} is no longer waiting for an approval: {outcome}"
            )
        return decided_approval, outcome

    def reject_overdue(self) -> list[ReadyNode]:
        """Reject every request past its deadline (nobody decided in time)."""
        client, keys = self.runtime.client, self.runtime.keys
        now_ms = self.runtime.store.server_time_ms()
        ready: list[ReadyNode] = []
        for member in client.zrangebyscore(keys.pending_approvals, "-inf", now_ms):
            run_id, _, node_id = member.partition("/")
            approval = self.read(run_id, node_id)
            if approval is None or approval.decision is not None:
                client.zrem(keys.pending_approvals, member)
                continue
            waited_s = (approval.deadline - approval.requested_at).total_seconds()
            try:
                _, queued = self._record(
                    approval,
                    approved=False,
                    by=TIMEOUT_DECIDER,
                    comment=f"nobody decided within {waited_s:g}s",
                )
            except ApprovalError:
                continue  # decided meanwhile, or its run ended: it left the index
            ready.extend(queued)
        return ready


def approval_fields(node_id: str) -> list[str]:
    """The fields of a run's ``approvals`` hash that hold the node's request and decision."""
    return [f"request:{node_id}", f"decision:{node_id}"]


def parse_approval(request: str | None, decision: str | None) -> Approval | None:
    if request is None:
        return None
    approval = Approval.model_validate_json(request)
    if decision is None:
        return approval
    return approval.model_copy(update={"decision": ApprovalDecision.model_validate_json(decision)})


def check_edited_args(approval: Approval, args: dict[str, Any], *, approved: bool) -> None:
    """Edited arguments only go with an approval; a node's may replace only its
    params, instruction or code, each of its own type."""
    if not approved:
        raise ApprovalError("edited arguments go with approve, not reject")
    if approval.kind == "tool":
        return
    for name, value in args.items():
        expected = EDITABLE_NODE_FIELDS.get(name)
        if expected is None:
            raise ApprovalError(
                f"a node's approval may edit {', '.join(EDITABLE_NODE_FIELDS)}; not {name!r}"
            )
        if not isinstance(value, expected):
            raise ApprovalError(f"the edited {name!r} must be a {expected.__name__}")


def audit_entry(
    approval: Approval,
    action: str,
    *,
    reason: str = "",
    by: str = "",
    args: dict[str, Any] | None = None,
) -> dict[str, str]:
    shown_args = approval.args if args is None else args
    return {
        "node": approval.node,
        "attempt": str(approval.attempt),
        "tool": approval.action,
        "action": action,
        "rule": f"approval {approval.id}",
        "reason": reason[:AUDITED_CHARS],
        "args": json.dumps(shown_args, sort_keys=True, default=str)[:AUDITED_CHARS],
        "by": by,
    }


def proposed_node_args(node: Node) -> dict[str, Any]:
    """What running a node will act on, as the approver sees (and may edit) it."""
    fields = {"params": node.params or None, "instruction": node.instruction, "code": node.code}
    return {name: value for name, value in fields.items() if value is not None}


def approved_node(ctx: NodeContext, node: Node) -> Node:
    """The node to run: as planned or as its approver edited it. For a node marked
    ``approval: required``, ApprovalNeeded until someone decided, ApprovalRejectedError
    if they said no."""
    if node.approval != "required":
        return node
    latest = ctx.approval()
    if latest is not None and latest.kind == "tool":
        return node  # approved before it first ran (and resumed since from its checkpoint)
    approval = decided(latest)
    if approval is None:
        raise ApprovalNeeded(Proposal(kind="node", action=node.type, args=proposed_node_args(node)))
    if approval.status == ApprovalStatus.REJECTED:
        raise ApprovalRejectedError(rejection_message(approval))
    return node.model_copy(update=approval.effective_args)


def rejection_message(approval: Approval) -> str:
    decision = approval.decision
    assert decision is not None
    comment = f": {decision.comment}" if decision.comment else ""
    return f"{approval.subject} was rejected by {decision.by}{comment}"


def parse_edited_args(text: str | None) -> dict[str, Any] | None:
    """``--args`` of approve: a JSON object, or None when not given."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InputError(f"--args is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise InputError("--args must be a JSON object of the arguments to use")
    return value
