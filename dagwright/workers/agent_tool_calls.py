"""One tool call of an agent, as its type's policy decides: run it (under its span and
audit record), refuse it, or hold it for a person's approval."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from dagwright.models import Approval, ApprovalStatus
from dagwright.telemetry.spans import TOOL_CALL
from dagwright.workers.agent_spec import AgentSpec
from dagwright.workers.context import NodeContext, OpenSpan
from dagwright.workers.proposals import ApprovalNeeded, Proposal, decided
from dagwright.workers.tools.base import ToolOutcome, ToolRegistry, truncate
from dagwright.workers.tools.policy import PolicyAction, PolicyDecision

AUDITED_ARGS_CHARS = 500
MAX_TOOL_NAME_CHARS = 64  # the API's limit; a name the model made up is cut in spans
MAX_TOOL_USE_ID_CHARS = 64  # ids are short ("toolu_..."); a made-up one is cut in spans


class ToolCaller:
    """Calls the tools of one agent node, as its type's policy allows."""

    def __init__(self, ctx: NodeContext, spec: AgentSpec, tools: ToolRegistry) -> None:
        self.ctx = ctx
        self.spec = spec
        self.tools = tools

    def call(
        self, name: str, args: dict[str, Any], call_id: str, reasoning: Callable[[], str]
    ) -> ToolOutcome:
        """Call tool ``name`` for the model, as the policy decides: run it, refuse it, or
        hold it for a person's approval (``reasoning``: what the model said, for them)."""
        # Sizes, not contents: arguments and results may carry anything, secrets included.
        # The outcome stays "error" if the call raises (an open breaker, a lost node).
        with self.ctx.span(
            TOOL_CALL,
            tool=name[:MAX_TOOL_NAME_CHARS],
            tool_use_id=call_id[:MAX_TOOL_USE_ID_CHARS],
            input_bytes=json_bytes(args),
            outcome="error",
        ) as span:
            decision = self.spec.policy.decide(name, args)
            span.attributes["decision"] = decision.action.value
            outcome = self._decide(name, args, call_id, decision, span, reasoning)
            span.attributes["outcome"] = outcome_of(outcome, decision)
            span.attributes["output_bytes"] = len(outcome.text.encode())
            if outcome.is_error:
                span.status = "error"
            return outcome

    def _decide(
        self,
        name: str,
        args: dict[str, Any],
        call_id: str,
        decision: PolicyDecision,
        span: OpenSpan,
        reasoning: Callable[[], str],
    ) -> ToolOutcome:
        if decision.action == PolicyAction.REQUIRE_APPROVAL:
            return self._call_with_approval(name, args, call_id, decision, span, reasoning)
        self._audit(name, args, decision)
        if decision.action == PolicyAction.DENY:
            return ToolOutcome(
                f"refused by the tool policy: {decision.reason}",
                is_error=True,
                refused_by_policy=True,
            )
        return self._run_tool(name, args)

    def _call_with_approval(
        self,
        name: str,
        args: dict[str, Any],
        call_id: str,
        decision: PolicyDecision,
        span: OpenSpan,
        reasoning: Callable[[], str],
    ) -> ToolOutcome:
        """A call the policy holds for a person: ask (the node waits, this loop stops),
        then, once resumed from the checkpoint, act on the decision."""
        approval = decided(self.ctx.approval(), call_id)
        if approval is None:
            self._audit(name, args, decision)
            span.attributes["outcome"] = "awaiting_approval"
            raise ApprovalNeeded(Proposal("tool", name, args, reasoning(), tool_use_id=call_id))
        if approval.status == ApprovalStatus.REJECTED:
            return ToolOutcome(rejected_call(approval), is_error=True, refused_by_policy=True)
        return self._run_tool(name, approval.effective_args)

    def _audit(self, name: str, args: dict[str, Any], decision: PolicyDecision) -> None:
        self.ctx.audit(
            tool=name,
            action=decision.action.value,
            rule="default" if decision.rule is None else str(decision.rule),
            reason=decision.reason,
            args=truncate(json.dumps(args, sort_keys=True, default=str), AUDITED_ARGS_CHARS),
        )

    def _run_tool(self, name: str, args: dict[str, Any]) -> ToolOutcome:
        tool = self.tools.get(name) if name in self.spec.tools else None
        if tool is None:
            return ToolOutcome(
                f"no tool {name!r}; the tools are: {', '.join(self.spec.tools)}", True
            )
        return tool.call(self.ctx, args)


def outcome_of(outcome: ToolOutcome, decision: PolicyDecision) -> str:
    """How a tool call ended, for its span: ok, error, denied (by the policy) or rejected
    (by a person)."""
    if outcome.refused_by_policy:
        return "denied" if decision.action == PolicyAction.DENY else "rejected"
    return "error" if outcome.is_error else "ok"


def json_bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str).encode())


def rejected_call(approval: Approval) -> str:
    """The tool result the model sees for a call a person rejected."""
    decision = approval.decision
    assert decision is not None
    why = f" Their comment: {decision.comment}" if decision.comment else ""
    return f"A person ({decision.by}) rejected this call; do not try it again.{why}"
