"""``MemoryServices``: what a node may ask of dagwright, kept in memory, so that a worker
type, a function or an agent runs in a plain test (no Redis, no broker, no worker), and
what it did can be read back as lists.

The orchestrator implements the same ``NodeServices`` protocol over Redis; this one is
also what ``dagwright plan`` runs the planner with, as a plan made without a run writes
nothing anywhere: so it lives here, with the worker code, and ``dagwright.testing``
exports it for tests (production code never imports the test kit).
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from dagwright.errors import LLMNotConfiguredError, NodeLostError, TeamAppError, ToolError
from dagwright.llm.batches import MessageBatches
from dagwright.llm.input_tokens import rough_request_tokens
from dagwright.llm.protocol import LLM, LLMRequest
from dagwright.memory.store import NodeMemory
from dagwright.models import Approval, Budget, Usage
from dagwright.resilience import Breakers
from dagwright.settings import Settings
from dagwright.telemetry.counters import Increment
from dagwright.telemetry.spans import Span
from dagwright.workers.budgets import Overrun, run_overrun
from dagwright.workers.context import NodeContext, RunBackground
from dagwright.workers.team_tasks import TeamTasks
from dagwright.workers.tools.workspace import DiskWorkspace, Workspace

T = TypeVar("T")


class MemoryServices:
    """``NodeServices`` in memory: give it to a ``NodeContext`` (``services.context()``
    makes one) and call your worker type's function, your tool, or ``run_agent``.

    Args:
        llm: What ``ctx.llm()`` returns: a ``ScriptedLLM``, or a real LLM pointed at the
            fake Messages API. None: ``ctx.llm()`` raises LLMNotConfiguredError.
        workspace_dir: Where ``ctx.workspace()`` keeps files (one directory per run);
            None: the workspace tools are refused.
        run_budget: The run's budget, checked before every LLM call (None: no limit).
        lose_after_writes: Raise NodeLostError on the write after this many checkpoints,
            as a worker whose lease was taken over sees: to test resuming from
            ``checkpoints[-1]``.
        workspace_max_bytes: The largest workspace file.

    What the node did is kept in ``checkpoints``, ``usage``, ``events``, ``audits``,
    ``reservations`` (the worst case of every LLM call checked against the budget),
    ``spans``, ``counted`` (metrics increments), ``followups`` and ``background_reads``.
    Set ``approval_given`` to the decision a tool call waiting for approval gets,
    ``breakers`` to run ``ctx.guard`` calls behind real circuit breakers (None: calls go
    straight through), and ``background`` to the run's goal and context its agents see
    (its ``nonce`` is random per object).
    """

    def __init__(
        self,
        llm: LLM | None = None,
        workspace_dir: Path | None = None,
        *,
        run_budget: Budget | None = None,
        lose_after_writes: int | None = None,
        workspace_max_bytes: int = 10_000,
    ) -> None:
        self._llm = llm
        self.workspace_dir = workspace_dir
        self.workspace_max_bytes = workspace_max_bytes
        self.run_budget = run_budget
        self.lose_after_writes = lose_after_writes
        self.checkpoints: list[Any] = []
        self.usage = Usage()
        self.events: list[list[Any]] = []
        self.audits: list[dict[str, str]] = []
        self.reservations: list[Usage] = []
        self.spans: list[Span] = []
        self.counted: list[Increment] = []
        self.followups: list[tuple[str, str]] = []
        self.approval_given: Approval | None = None
        self.breakers: Breakers | None = None
        self.background = RunBackground(nonce=secrets.token_hex(16))
        self.background_reads = 0

    def context(
        self,
        *,
        inputs: dict[str, Any] | None = None,
        checkpoint: Any = None,
        settings: Settings | None = None,
        run_id: str = "run1",
        node_id: str = "agent",
        attempt: int = 1,
    ) -> NodeContext:
        """A context for one attempt of a node, served by this object. ``checkpoint`` is
        what an earlier attempt saved (``last_checkpoint``): a redelivery."""
        return NodeContext(
            run_id=run_id,
            node_id=node_id,
            attempt=attempt,
            fence=attempt,
            settings=settings or Settings(),
            inputs=inputs or {},
            services=self,
            last_checkpoint=checkpoint,
        )

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
        if self._llm is None:
            raise LLMNotConfiguredError("MemoryServices was given no LLM")
        return self._llm

    def llm_batches(self, ctx: NodeContext) -> MessageBatches:
        raise LLMNotConfiguredError("MemoryServices has no Message Batches API")

    def team_tasks(self, ctx: NodeContext) -> TeamTasks:
        raise TeamAppError("MemoryServices has no team Celery app")

    def estimate_input_tokens(self, ctx: NodeContext, request: LLMRequest) -> int:
        return rough_request_tokens(request)  # no count_tokens endpoint here

    def reserve_llm_call(self, ctx: NodeContext, worst_case: Usage) -> Overrun | None:
        self.reservations.append(worst_case)
        return run_overrun(self.run_budget, self.usage, worst_case)  # one call at a time

    def workspace(self, ctx: NodeContext) -> Workspace:
        if self.workspace_dir is None:
            raise ToolError("there is no workspace here (MemoryServices has no workspace_dir)")
        return DiskWorkspace(self.workspace_dir / ctx.run_id, max_bytes=self.workspace_max_bytes)

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

    def approval(self, ctx: NodeContext) -> Approval | None:
        return self.approval_given

    def propose_followup(self, ctx: NodeContext, goal: str, reason: str) -> str:
        self.followups.append((goal, reason))
        return f"queued follow-up {len(self.followups)}"

    def memory(self, ctx: NodeContext) -> NodeMemory:
        raise ToolError("the memory tool needs Redis: run the node under a worker")

    def run_background(self, ctx: NodeContext) -> RunBackground:
        self.background_reads += 1
        return self.background
