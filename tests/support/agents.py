"""In-memory NodeServices, to unit-test agent loops without Redis."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from dagwright.errors import NodeLostError
from dagwright.llm.protocol import LLM
from dagwright.models import Approval, Budget, Node, Usage
from dagwright.resilience import Breakers
from dagwright.settings import Settings
from dagwright.telemetry.counters import Increment
from dagwright.telemetry.spans import Span
from dagwright.workers.budgets import Overrun, run_overrun
from dagwright.workers.context import NodeContext
from dagwright.workers.tools.workspace import DiskWorkspace, Workspace

T = TypeVar("T")


class MemoryServices:
    def __init__(
        self, llm: LLM, workspace_dir: Path, *, lose_after_writes: int | None = None
    ) -> None:
        self._llm = llm
        self.workspace_dir = workspace_dir
        self.checkpoints: list[Any] = []
        self.usage = Usage()
        self.events: list[list[Any]] = []
        self.audits: list[dict[str, str]] = []
        self.lose_after_writes = lose_after_writes
        self.run_budget: Budget | None = None
        self.reservations: list[Usage] = []  # the worst case of every call checked
        self.spans: list[Span] = []
        self.counted: list[Increment] = []  # metrics counters added

    def record_progress(
        self,
        ctx: NodeContext,
        *,
        checkpoint: Any = None,
        usage: Usage | None = None,
        event: list[Any] | None = None,
    ) -> None:
        if self.lose_after_writes is not None and len(self.checkpoints) >= self.lose_after_writes:
            raise NodeLostError("lost (simulated crash)")
        if checkpoint is not None:
            self.checkpoints.append(copy.deepcopy(checkpoint))
        if usage is not None:
            self.usage = self.usage.plus(usage)
        if event is not None:
            self.events.append(event)

    def audit(self, ctx: NodeContext, fields: dict[str, str]) -> None:
        self.audits.append(fields)

    def count(self, increments: list[Increment]) -> None:
        self.counted += increments

    def llm(self, ctx: NodeContext) -> LLM:
        return self._llm

    def reserve_llm_call(self, ctx: NodeContext, worst_case: Usage) -> Overrun | None:
        self.reservations.append(worst_case)
        return run_overrun(self.run_budget, self.usage, worst_case)

    def workspace(self, ctx: NodeContext) -> Workspace:
        return DiskWorkspace(self.workspace_dir / ctx.run_id, max_bytes=10_000)

    breakers: Breakers | None = None  # None: calls go straight through
    followups: list[tuple[str, str]] = []

    def approval(self, ctx: NodeContext) -> Approval | None:
        return self.approval_given

    approval_given: Approval | None = None

    def propose_followup(self, ctx: NodeContext, goal: str, reason: str) -> str:
        self.followups = [*self.followups, (goal, reason)]
        return f"queued follow-up {len(self.followups)}"

    def guard(
        self,
        ctx: NodeContext,
        name: str,
        call: Callable[[], T],
        is_failure: Callable[[BaseException], bool],
    ) -> T:
        if self.breakers is None:
            return call()
        with self.breakers.observed(ctx.breaker_event):
            return self.breakers.call(name, call, is_failure=is_failure)

    def record_span(self, ctx: NodeContext, span: Span) -> None:
        self.spans.append(span)


def agent_context(
    services: MemoryServices,
    *,
    inputs: dict[str, Any] | None = None,
    checkpoint: Any = None,
    settings: Settings | None = None,
) -> NodeContext:
    return NodeContext(
        run_id="run1",
        node_id="agent",
        attempt=1,
        fence=1,
        settings=settings or Settings(),
        inputs=inputs or {},
        services=services,
        last_checkpoint=checkpoint,
    )


def agent_node(instruction: str = "Do the task.", type: str = "researcher") -> Node:
    return Node(id="agent", type=type, instruction=instruction)
