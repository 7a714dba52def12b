"""One tool call of an agent, as its type's policy decides: run it (under its span and
audit record), refuse it, or hold it for a person's approval."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from dagwright.models import REFUSED, Approval, ApprovalStatus
from dagwright.redaction import known_secrets, redact
from dagwright.telemetry.spans import TOOL_CALL
from dagwright.workers.agent_prompt import delimited_tool_result
from dagwright.workers.agent_spec import AgentSpec
from dagwright.workers.context import NodeContext, OpenSpan, ToolCallRef
from dagwright.workers.proposals import ApprovalNeeded, Proposal, decided
from dagwright.workers.tools.base import ToolOutcome, ToolRegistry, truncate
from dagwright.workers.tools.policy import PolicyAction, PolicyDecision
from dagwright.workers.untrusted import DataFence

AUDITED_ARGS_CHARS = 500
AUDITED_REASON_CHARS = 500
MAX_TOOL_NAME_CHARS = 64  # the API's limit; a name the model made up is cut in spans
MAX_TOOL_USE_ID_CHARS = 64  # ids are short ("toolu_..."); a made-up one is cut in spans


class ToolCaller:
    """Calls the tools of one agent node, as its type's policy allows.

    Audit: one entry per call, written once its outcome is known, so that a call the
    tool refused (a path outside the workspace, a domain not allowed, arguments not
    matching its schema) is audited as ``refused`` with the tool's reason, never as
    ``allow``. A call cut short by a dying worker runs again on resume (tools are
    at-least-once) and is audited then. What reaches the model, the checkpoint and the
    audit stream is redacted: a tool's outcome by ``Tool.call``, the rest here. What a
    tool that carries outside content returns reaches the model inside ``fence``'s tags.
    """

    def __init__(
        self,
        ctx: NodeContext,
        spec: AgentSpec,
        tools: ToolRegistry,
        fence: DataFence,
        offered: tuple[str, ...] | None = None,
    ) -> None:
        self.ctx = ctx
        self.spec = spec
        self.tools = tools
        self.fence = fence
        # The tools this node was offered (its own subset, those the settings allow):
        # the only ones it may call.
        self.offered = spec.tools if offered is None else offered
        self.secrets = known_secrets(ctx.settings)

    def call(
        self, name: str, args: dict[str, Any], call_id: str, reasoning: Callable[[], str]
    ) -> ToolOutcome:
        """Call tool ``name`` for the model, as the policy decides: run it, refuse it, or
        hold it for a person's approval (``reasoning``: what the model said, for them)."""
        self.ctx.tool_call = ToolCallRef(call_id, self.spec.name)
        # Sizes, not contents: arguments and results may carry anything, secrets included.
        # The outcome stays "error" if the call raises (an open breaker, a lost node).
        with self.ctx.span(
            TOOL_CALL,
            tool=name[:MAX_TOOL_NAME_CHARS],
            tool_use_id=call_id[:MAX_TOOL_USE_ID_CHARS],
            input_bytes=json_bytes(args),
            outcome="error",
        ) as span:
            if name not in self.offered:  # a name the model made up: no policy question
                return self._no_such_tool(name, args, span)
            decision = self.spec.policy.decide(name, args)
            span.attributes["decision"] = decision.action.value
            outcome = self._decide(name, args, call_id, decision, span, reasoning)
            span.attributes["outcome"] = outcome_of(outcome, str(span.attributes["decision"]))
            span.attributes["output_bytes"] = len(outcome.text.encode())
            if outcome.is_error:
                span.status = "error"
            return outcome

    def _no_such_tool(self, name: str, args: dict[str, Any], span: OpenSpan) -> ToolOutcome:
        """The answer to a call of a tool this node was not offered: which tools it has,
        so that the model can correct the name (an error result, never a policy refusal)."""
        shown = self._redact(name[:MAX_TOOL_NAME_CHARS])
        text = f"no such tool: {shown}; the tools are: {', '.join(self.offered) or 'none'}"
        refusal = PolicyDecision(PolicyAction.DENY, None, text)
        self._audit(shown, args, refusal, action=REFUSED)
        span.attributes.update(decision="unknown", outcome="error", output_bytes=len(text))
        span.status = "error"
        return ToolOutcome(text, is_error=True, refused_by_tool=True)

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
        if decision.action == PolicyAction.DENY:
            return self._deny(name, args, decision)
        return self._run_audited(name, args, decision)

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
        then, once resumed from the checkpoint, act on the decision (audited when it was
        made: ``approved`` or ``rejected``)."""
        approval = decided(self.ctx.approval(), call_id)
        if approval is None:
            self._audit(name, args, decision)
            span.attributes["outcome"] = "awaiting_approval"
            raise ApprovalNeeded(Proposal("tool", name, args, reasoning(), tool_use_id=call_id))
        if approval.status == ApprovalStatus.REJECTED:
            return ToolOutcome(self._redact(rejected_call(approval)), True, refused_by_policy=True)
        approved_args = approval.effective_args
        denial = self.spec.policy.denial(name, approved_args)
        if denial is not None:  # a person may approve what the policy holds, not what it denies
            span.attributes["decision"] = denial.action.value
            return self._deny(name, approved_args, approved_but_denied(denial))
        return self._run_audited(name, approved_args, decision)

    def _deny(self, name: str, args: dict[str, Any], decision: PolicyDecision) -> ToolOutcome:
        self._audit(name, args, decision)
        return ToolOutcome(
            self._redact(f"refused by the tool policy: {decision.reason}"),
            is_error=True,
            refused_by_policy=True,
        )

    def _run_audited(
        self, name: str, args: dict[str, Any], decision: PolicyDecision
    ) -> ToolOutcome:
        """Run a call the policy (or a person) let through, then audit it: ``refused``
        with the tool's reason if the tool refused it, else ``allow`` (an approved call's
        entry is its approval)."""
        outcome = self._run_tool(name, args)
        if outcome.refused_by_tool:
            refusal = PolicyDecision(decision.action, decision.rule, outcome.text)
            self._audit(name, args, refusal, action=REFUSED)
        elif decision.action == PolicyAction.ALLOW:
            self._audit(name, args, decision)
        return self._delimited(name, outcome)

    def _delimited(self, name: str, outcome: ToolOutcome) -> ToolOutcome:
        """The outcome of a tool that carries outside content as a block of untrusted data:
        what it returned, and its failures (an exception may quote what a server said).
        Its refusals (a ToolError: a bad path, a domain not allowed) are its own words,
        and stay plain, as they reach a node's error."""
        tool = self.tools.get(name) if name in self.spec.tools else None
        if tool is None or not tool.carries_outside_content or outcome.refused_by_tool:
            return outcome
        return dataclasses.replace(
            outcome, text=delimited_tool_result(self.fence, name, outcome.text)
        )

    def _audit(
        self,
        name: str,
        args: dict[str, Any],
        decision: PolicyDecision,
        *,
        action: str | None = None,
    ) -> None:
        shown_args = json.dumps(args, sort_keys=True, default=str)
        self.ctx.audit(
            tool=name,
            action=action or decision.action.value,
            rule="default" if decision.rule is None else str(decision.rule),
            reason=truncate(self._redact(decision.reason), AUDITED_REASON_CHARS),
            args=truncate(self._redact(shown_args), AUDITED_ARGS_CHARS),
        )

    def _run_tool(self, name: str, args: dict[str, Any]) -> ToolOutcome:
        """Run the tool (its outcome comes redacted: ``Tool.call``)."""
        tool = self.tools.get(name) if name in self.offered else None
        if tool is None:
            refusal = f"no such tool: {name}; the tools are: {', '.join(self.offered) or 'none'}"
            return ToolOutcome(refusal, is_error=True, refused_by_tool=True)
        return tool.call(self.ctx, args)

    def _redact(self, text: str) -> str:
        return redact(text, self.secrets)


def approved_but_denied(denial: PolicyDecision) -> PolicyDecision:
    """The decision on approved arguments that a deny rule matches."""
    reason = f"the approved arguments match a deny rule: {denial.reason or 'no reason given'}"
    return PolicyDecision(PolicyAction.DENY, denial.rule, reason)


def outcome_of(outcome: ToolOutcome, decision: str) -> str:
    """How a tool call ended, for its span: ok, error, denied (by the policy) or rejected
    (by a person)."""
    if outcome.refused_by_policy:
        return "denied" if decision == PolicyAction.DENY else "rejected"
    return "error" if outcome.is_error else "ok"


def json_bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str).encode())


def rejected_call(approval: Approval) -> str:
    """The tool result the model sees for a call a person rejected."""
    decision = approval.decision
    assert decision is not None
    why = f" Their comment: {decision.comment}" if decision.comment else ""
    return f"A person ({decision.by}) rejected this call; do not try it again.{why}"
