"""NodeServices over Redis: what a running node may ask of dagwright."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from dagwright.errors import NodeLostError, ScheduleError, TeamAppError
from dagwright.llm import (
    LLM,
    InputTokenEstimator,
    LLMRequest,
    LLMResponse,
    build_batches,
    build_input_estimator,
    build_llm,
)
from dagwright.llm.batches import MessageBatches
from dagwright.memory.namespaces import MEMORY_FIELD, namespace_of
from dagwright.memory.store import MemoryStore, NodeMemory
from dagwright.models import Approval, Budget, Usage
from dagwright.orchestrator.control.approvals import ApprovalBook
from dagwright.orchestrator.execution.team_tasks import RecordedTeamTasks, TeamAppFactory
from dagwright.orchestrator.runstate.creation import DEPTH_FIELD, PROMPT_NONCE_FIELD, SCHEDULE_FIELD
from dagwright.orchestrator.runstate.machine import LeaseRef
from dagwright.orchestrator.runtime import Runtime
from dagwright.resilience import Breakers
from dagwright.telemetry.counters import Increment
from dagwright.telemetry.recorder import SpanRecorder
from dagwright.telemetry.spans import Span
from dagwright.workers import NodeContext
from dagwright.workers.budgets import (
    BY_NAME,
    RUN_SCOPE,
    Overrun,
    amounts,
    budget_of_run,
    run_hint,
    run_overrun,
)
from dagwright.workers.context import RunBackground
from dagwright.workers.team_tasks import TeamTasks
from dagwright.workers.tools.workspace import DiskWorkspace, RedisWorkspace, Workspace

T = TypeVar("T")

FollowupStarter = Callable[[str, str, str], str]
"""Starts a follow-up run that a scheduled run's node proposes: (run id, goal, reason) →
what happened, for the model; ScheduleError saying why not. The schedules sit above the
orchestrator, so the worker's environment passes it in (schedules/followups.py)."""


class RedisNodeServices:
    """One per worker process; its LLM client is built on first use and shared."""

    def __init__(
        self,
        runtime: Runtime,
        team_app: TeamAppFactory | None = None,
        *,
        followups: FollowupStarter | None = None,
    ) -> None:
        self.runtime = runtime
        self.team_app = team_app  # None: this process has no team Celery app
        self.followups = followups  # None: this process starts no follow-up runs
        self._llm: LLM | None = None
        self._batches: MessageBatches | None = None
        self._input_estimator: InputTokenEstimator | None = None
        self._llm_lock = threading.Lock()
        self._memory: MemoryStore | None = None
        self.spans = SpanRecorder(runtime.client, runtime.keys, runtime.settings)

    def record_progress(
        self,
        ctx: NodeContext,
        *,
        checkpoint: Any = None,
        usage: Usage | None = None,
        event: list[str | int | float] | None = None,
    ) -> None:
        settings = self.runtime.settings
        recorded = self.runtime.machine.record_progress(
            lease_of(ctx),
            lease_s=settings.dispatch.lease_s,
            checkpoint_json="" if checkpoint is None else json.dumps(checkpoint),
            usage_json=usage.model_dump_json() if usage is not None else "",
            event=event,
        )
        if not recorded:
            lost(ctx)

    def count(self, increments: list[Increment]) -> None:
        self.runtime.counters.add(increments)

    def audit(self, ctx: NodeContext, fields: dict[str, str]) -> None:
        entry: dict[Any, Any] = {"node": ctx.node_id, "attempt": str(ctx.attempt), **fields}
        self.runtime.client.xadd(
            self.runtime.keys.run_key(ctx.run_id, "audit"),
            entry,
            maxlen=self.runtime.settings.retention.events_maxlen,
            approximate=True,
        )

    def reserve_llm_call(self, ctx: NodeContext, worst_case: Usage) -> Overrun | None:
        if not worst_case.cost_is_known:  # refused at submit; here if prices differ by process
            refused = self._unpriced_overrun(ctx, worst_case)
            if refused is not None:
                return refused
        reservation = self.runtime.machine.reserve_budget(lease_of(ctx), amounts(worst_case))
        if not reservation.owned:
            lost(ctx)
        refusal = reservation.refusal
        if refusal is None:
            return None
        dimension = BY_NAME[refusal.dimension]
        return Overrun(
            RUN_SCOPE,
            dimension,
            limit=refusal.limit,
            spent=refusal.spent,
            projected=refusal.projected,
            reserved=refusal.held,
            hint=run_hint(dimension),
        )

    def estimate_input_tokens(self, ctx: NodeContext, request: LLMRequest) -> int:
        with self._llm_lock:
            if self._input_estimator is None:
                self._input_estimator = build_input_estimator(self.runtime.settings.llm)
            estimator = self._input_estimator
        return estimator.estimate(request)

    def _unpriced_overrun(self, ctx: NodeContext, worst_case: Usage) -> Overrun | None:
        """A call of unknown cost under the run's USD budget (the rest of a budget: none)."""
        run = self.runtime.client.hgetall(self.runtime.keys.run_key(ctx.run_id, "run"))
        budget = budget_of_run(run)
        if budget is None or budget.max_cost_usd is None:
            return None
        return run_overrun(Budget(max_cost_usd=budget.max_cost_usd), Usage(), worst_case)

    def llm(self, ctx: NodeContext) -> LLM:
        with self._llm_lock:
            if self._llm is None:
                runtime = self.runtime
                self._llm = build_llm(
                    runtime.settings.llm, runtime.client, runtime.keys, runtime.breakers
                )
            return BreakerObservedLLM(self._llm, self.runtime.breakers, ctx)

    def llm_batches(self, ctx: NodeContext) -> MessageBatches:
        with self._llm_lock:
            if self._batches is None:
                self._batches = build_batches(self.runtime.settings.llm, self.runtime.breakers)
            return self._batches

    def guard(
        self,
        ctx: NodeContext,
        name: str,
        call: Callable[[], T],
        is_failure: Callable[[BaseException], bool],
    ) -> T:
        breakers = self.runtime.breakers
        with breakers.observed(ctx.breaker_event):
            return breakers.call(name, call, is_failure=is_failure)

    def record_span(self, ctx: NodeContext, span: Span) -> None:
        self.spans.record(ctx.run_id, span)

    def workspace(self, ctx: NodeContext) -> Workspace:
        settings = self.runtime.settings
        if settings.workspace.backend == "disk":
            return DiskWorkspace(
                settings.workspace_root / ctx.run_id, max_bytes=settings.workspace.max_bytes
            )

        def write_file(path: str, content: str) -> None:
            if not self.runtime.machine.write_workspace_file(lease_of(ctx), path, content):
                lost(ctx)

        return RedisWorkspace(
            self.runtime.client,
            self.runtime.keys.run_key(ctx.run_id, "workspace"),
            max_bytes=settings.workspace.max_bytes,
            write_file=write_file,
        )

    def team_tasks(self, ctx: NodeContext) -> TeamTasks:
        if self.team_app is None:
            raise TeamAppError(
                "this worker has no team Celery app: set DAGWRIGHT_CELERY_APP=module:app "
                "where it runs"
            )
        return RecordedTeamTasks(self.runtime, self.team_app(), ctx.run_id, ctx.node_id)

    def approval(self, ctx: NodeContext) -> Approval | None:
        return ApprovalBook(self.runtime).read(ctx.run_id, ctx.node_id)

    def propose_followup(self, ctx: NodeContext, goal: str, reason: str) -> str:
        if self.followups is None:
            raise ScheduleError("this worker cannot start follow-up runs")
        return self.followups(ctx.run_id, goal, reason)

    def memory(self, ctx: NodeContext) -> NodeMemory:
        settings = self.runtime.settings
        agent_type = ctx.tool_call.agent_type if ctx.tool_call is not None else ""
        attached = settings.memory.agent_memory.get(agent_type)
        run_key = self.runtime.keys.run_key(ctx.run_id, "run")
        named, schedule = self.runtime.client.hmget(run_key, [MEMORY_FIELD, SCHEDULE_FIELD])
        namespace = namespace_of(
            named, attached.namespace if attached else None, schedule, ctx.run_id
        )
        read_only = attached is not None and attached.read_only
        return NodeMemory(self._memory_store(), namespace, read_only=read_only)

    def _memory_store(self) -> MemoryStore:
        with self._llm_lock:
            if self._memory is None:
                runtime = self.runtime
                self._memory = MemoryStore(runtime.client, runtime.keys, runtime.settings)
            return self._memory

    def run_background(self, ctx: NodeContext) -> RunBackground:
        run_key = self.runtime.keys.run_key(ctx.run_id, "run")
        goal, request, nonce, depth = self.runtime.client.hmget(
            run_key, ["goal", "request", PROMPT_NONCE_FIELD, DEPTH_FIELD]
        )
        # A goal run keeps its planning request (goal, context, ...) as JSON; a plan's
        # run has only the plan's goal.
        context = str(json.loads(request).get("context", "")) if request else ""
        return RunBackground(
            goal=goal or "",
            context=context,
            nonce=nonce or "",
            goal_from_model=int(depth or 0) > 0,  # a follow-up's goal: a model wrote it
        )


class BreakerObservedLLM:
    """The process's LLM as one node calls it: what its calls do to the model's breaker
    (opened, refused, closed) goes into that node's trace."""

    def __init__(self, llm: LLM, breakers: Breakers, ctx: NodeContext) -> None:
        self.llm = llm
        self.breakers = breakers
        self.ctx = ctx

    def complete(self, request: LLMRequest) -> LLMResponse:
        with self.breakers.observed(self.ctx.breaker_event):
            return self.llm.complete(request)


def lease_of(ctx: NodeContext) -> LeaseRef:
    """The node's claim, which a fenced write names (a node run ahead is claimed first)."""
    if ctx.claim_first is not None:
        ctx.claim_first()
    return LeaseRef(ctx.run_id, ctx.node_id, ctx.fence)


def lost(ctx: NodeContext) -> NoReturn:
    """Stop the node: this worker no longer owns it."""
    ctx.stop.set()
    raise NodeLostError(
        f"{ctx.run_id}/{ctx.node_id} is no longer this worker's (re-queued or cancelled)"
    )
