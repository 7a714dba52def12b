"""The typed context a worker gets for one execution of one node."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from dagwright.models import Approval, Usage
from dagwright.redaction import known_secrets, redact
from dagwright.settings import Settings
from dagwright.telemetry.counters import Increment, llm_usage
from dagwright.telemetry.spans import BREAKER, LLM_CALL, AttributeValue, Span, attempt_span_id
from dagwright.workers.proposals import ApprovalNeeded

if TYPE_CHECKING:
    from dagwright.llm.batches import MessageBatches
    from dagwright.llm.protocol import LLM, LLMRequest, LLMResponse
    from dagwright.memory.store import NodeMemory
    from dagwright.resilience import BreakerEvent
    from dagwright.workers.budgets import Overrun
    from dagwright.workers.team_tasks import TeamTasks
    from dagwright.workers.tools.workspace import Workspace

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class ToolCallRef:
    """One tool call of an agent: its ``tool_use`` id and the agent type making it."""

    tool_use_id: str
    agent_type: str


@dataclass(frozen=True)
class RunBackground:
    """What a run was started with that every one of its agents is told, and the per-run
    randomness their data fences derive from (``workers/untrusted.py``)."""

    goal: str = ""
    """The run's goal: the goal it was planned from, or a plan file's ``goal``."""
    context: str = ""
    """The context given with the goal (``dagwright run GOAL --context``)."""
    nonce: str = ""
    """Random, per run ("": a run from before nonces; its nodes' fences are random)."""
    goal_from_model: bool = False
    """The goal was written by a model, not by the person who started the run (a
    follow-up a scheduled run's agent proposed): shown as untrusted data, never obeyed."""


class NodeServices(Protocol):
    """What a running node may ask of dagwright. Implemented over Redis by the
    orchestrator; tests of worker code may pass their own."""

    def record_progress(
        self,
        ctx: NodeContext,
        *,
        checkpoint: Any = None,
        usage: Usage | None = None,
        event: list[str | int | float] | None = None,
    ) -> None:
        """Save a checkpoint (None: unchanged), one LLM call's usage and an event, in one
        fenced write. Raises NodeLostError if the node is no longer this worker's."""
        ...

    def audit(self, ctx: NodeContext, fields: dict[str, str]) -> None:
        """Append a tool-policy decision to the run's audit stream."""
        ...

    def count(self, increments: list[Increment]) -> None:
        """Add to the deployment's metrics counters (best effort: never raises)."""
        ...

    def llm(self, ctx: NodeContext) -> LLM:
        """The LLM of this process, for this node's calls (LLMNotConfiguredError if none
        is configured)."""
        ...

    def llm_batches(self, ctx: NodeContext) -> MessageBatches:
        """The Message Batches API of this process's LLM endpoint, for the calls of a run
        (or agent type) that asked for half-price calls (``llm/batches.py``)."""
        ...

    def team_tasks(self, ctx: NodeContext) -> TeamTasks:
        """The team's own Celery app (``DAGWRIGHT_CELERY_APP``), for a ``celery_task``
        node (TeamAppError if none is configured or it is unfit)."""
        ...

    def workspace(self, ctx: NodeContext) -> Workspace:
        """The run's workspace, shared by its nodes (writes fenced like progress)."""
        ...

    def estimate_input_tokens(self, ctx: NodeContext, request: LLMRequest) -> int:
        """The input tokens ``request`` will take: its system prompt, tools and messages
        (llm/input_tokens.py: the API's count where it answers, characters otherwise)."""
        ...

    def reserve_llm_call(self, ctx: NodeContext, worst_case: Usage) -> Overrun | None:
        """Hold ``worst_case`` of the run's budget for the node's next LLM call, until the
        call's usage is recorded: None if the run has room for it (or no budget), else the
        limit it would pass (nothing is held then). Calls of nodes running at once count
        against each other. NodeLostError if the node is no longer this worker's."""
        ...

    def guard(
        self,
        ctx: NodeContext,
        name: str,
        call: Callable[[], T],
        is_failure: Callable[[BaseException], bool],
    ) -> T:
        """``call()`` behind the circuit breaker ``name`` (shared by every worker);
        BreakerOpenError while it is open. Only exceptions ``is_failure`` accepts count.
        What the call does to the breaker (refused, opened, closed) is a span of ``ctx``."""
        ...

    def record_span(self, ctx: NodeContext, span: Span) -> None:
        """Add ``span`` to the run's trace; never raises (telemetry does not fail a node)."""
        ...

    def approval(self, ctx: NodeContext) -> Approval | None:
        """The node's latest approval request and its decision, if it ever asked."""
        ...

    def propose_followup(self, ctx: NodeContext, goal: str, reason: str) -> str:
        """Queue ``goal`` as a follow-up run if the run's schedule allows one more (what
        happened, for the model); ScheduleError saying why not."""
        ...

    def memory(self, ctx: NodeContext) -> NodeMemory:
        """The memory namespace of ``ctx``'s current tool call (``ctx.tool_call``): named
        by the run, the agent type, else the run's schedule, else the run
        (``memory/namespaces.py``); ToolError where there is no memory store."""
        ...

    def run_background(self, ctx: NodeContext) -> RunBackground:
        """The run's goal, context and nonce (one read; agents ask once per node, when
        they start a conversation: function nodes never do)."""
        ...


@dataclass
class NodeContext:
    """What a worker knows about the node it runs, and what it may ask of dagwright.

    ``last_checkpoint`` is what an earlier attempt of this node saved with
    ``checkpoint()`` (None on a first attempt): a redelivered node resumes from it.
    ``cancelled`` turns true when the node must stop early: its run was cancelled or timed
    out, its lease was lost to another worker, or the node ran past its ``timeout_s``
    (``timed_out`` then, its failure recorded already). Its result would be discarded
    anyway: check it (or use ``sleep``) in long loops. ``response_cache``: the run asked
    that its agents' LLM calls use the cross-run response cache (``submit(...,
    response_cache=True)``); ``llm_batch``: that they go through the Message Batches API
    at half price (``submit(..., llm_batch=True)``, ``llm/batches.py``). ``inputs`` are
    the outputs of the node's dependencies, by node id; ``run_inputs`` the run's own
    inputs (``submit(plan, inputs=...)``, with the plan's defaults), the same for every
    node of the run.
    """

    run_id: str
    node_id: str
    attempt: int
    fence: int
    settings: Settings
    inputs: dict[str, Any]
    services: NodeServices
    last_checkpoint: Any = None
    response_cache: bool = False
    llm_batch: bool = False
    run_inputs: dict[str, Any] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    timed_out: bool = False  # set (before ``stop``) when the node ran past its timeout_s
    tool_call: ToolCallRef | None = None
    """The tool call being answered (set by the agent's ToolCaller before it runs the
    tool): what a tool whose effect belongs to the call reads (a memory write is applied
    once per ``tool_use`` id)."""
    claim_first: Callable[[], None] | None = None
    """Set while the node runs ahead of its claim (a chain's link: fence 0,
    orchestrator/execution/eager.py): claims it, which sets ``fence``. Called before
    anything fenced by the node's claim (a checkpoint, a workspace write, a budget
    reservation), so such a write is made under the claim, never refused for lack of it."""

    @property
    def cancelled(self) -> bool:
        return self.stop.is_set()

    def sleep(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True if woken early because the node must stop."""
        return self.stop.wait(seconds)

    def checkpoint(self, state: Any) -> None:
        """Save ``state`` (JSON) so that a redelivery of this node resumes from it."""
        self.services.record_progress(self, checkpoint=state)
        self.last_checkpoint = state

    def record_llm_call(self, response: LLMResponse, state: Any) -> None:
        """Save ``state`` with the usage of ``response`` and an ``llm.call`` event, at once:
        the call is paid for, so it must never be made again for this node."""
        event: list[str | int | float] = [
            LLM_CALL,
            "model", response.model,
            "input_tokens", response.usage.input_tokens,
            "output_tokens", response.usage.output_tokens,
            "cache_read_input_tokens", response.usage.cache_read_input_tokens,
            "cost_usd", response.usage.cost_usd,
            "unpriced_tokens", response.usage.unpriced_tokens,
            "latency_ms", int(response.latency_s * 1000),
            "cached", int(response.cached),
            "stop_reason", response.stop_reason,
        ]  # fmt: skip
        event += context_edit_fields(response)
        try:
            self.services.record_progress(self, checkpoint=state, usage=response.usage, event=event)
        finally:  # paid for, even if this node is no longer this worker's
            self.services.count(llm_usage(response.model, response.usage))
        self.last_checkpoint = state

    def count(self, increments: list[Increment]) -> None:
        """Add to the deployment's metrics counters (best effort: never raises)."""
        self.services.count(increments)

    def audit(self, **fields: str) -> None:
        self.services.audit(self, fields)

    def llm(self) -> LLM:
        return self.services.llm(self)

    def llm_batches(self) -> MessageBatches:
        return self.services.llm_batches(self)

    def workspace(self) -> Workspace:
        return self.services.workspace(self)

    def team_tasks(self) -> TeamTasks:
        return self.services.team_tasks(self)

    def guard(
        self, name: str, call: Callable[[], T], is_failure: Callable[[BaseException], bool]
    ) -> T:
        return self.services.guard(self, name, call, is_failure)

    def approval(self) -> Approval | None:
        return self.services.approval(self)

    def propose_followup(self, goal: str, reason: str = "") -> str:
        return self.services.propose_followup(self, goal, reason)

    def run_background(self) -> RunBackground:
        return self.services.run_background(self)

    def memory(self) -> NodeMemory:
        return self.services.memory(self)

    @contextmanager
    def span(self, name: str, **attributes: AttributeValue | None) -> Iterator[OpenSpan]:
        """Time the block as a span ``name`` of this node attempt, recorded when it ends.
        The block may add attributes or mark it failed; an exception marks it failed, with
        the exception's class and (redacted) message, and goes on. Waiting for an approval
        is not failing. None values are left out."""
        opened = OpenSpan(dict(attributes))
        start, started = datetime.now(UTC), time.monotonic()
        try:
            yield opened
        except ApprovalNeeded:
            raise
        except Exception as exc:
            opened.status = "error"
            opened.attributes.update(error_attributes(exc, self.settings))
            raise
        finally:
            end = start + timedelta(seconds=time.monotonic() - started)
            self._record_span(name, start, end, opened.status, opened.attributes)

    def instant(
        self, name: str, *, status: Literal["ok", "error"] = "ok", **attributes: AttributeValue
    ) -> None:
        """Record a zero-length span now (an event: a breaker refusing a call)."""
        now = datetime.now(UTC)
        self._record_span(name, now, now, status, dict(attributes))

    def breaker_event(self, event: BreakerEvent) -> None:
        """Record what one of this node's calls did to a circuit breaker."""
        self.instant(
            BREAKER,
            status="ok" if event.kind == "closed" else "error",
            breaker=event.breaker,
            event=event.kind,
            open_for_s=round(event.open_for_s, 3),
        )

    def _record_span(
        self,
        name: str,
        start: datetime,
        end: datetime,
        status: Literal["ok", "error"],
        attributes: dict[str, AttributeValue | None],
    ) -> None:
        """Best effort: a span that cannot be built (an attribute of another type) is
        dropped, never raised into the node, nor in place of the block's own error."""
        try:
            span = Span(
                span_id=uuid.uuid4().hex[:16],
                parent_id=attempt_span_id(self.node_id, self.attempt),
                name=name,
                node=self.node_id,
                attempt=self.attempt,
                start=start,
                end=end,
                status=status,
                attributes={key: value for key, value in attributes.items() if value is not None},
            )
        except ValueError:
            # pydantic's ValidationError: an attribute is not a str, int, float or bool
            log.warning("span %s of %s/%s dropped", name, self.run_id, self.node_id, exc_info=True)
            return
        self.services.record_span(self, span)


@dataclass
class OpenSpan:
    """A span being timed (``NodeContext.span``): what its block may still change."""

    attributes: dict[str, AttributeValue | None]
    status: Literal["ok", "error"] = "ok"


SPAN_ERROR_CHARS = 300


def context_edit_fields(response: LLMResponse) -> list[str | int | float]:
    """What the API's context edits cleared from the call's prompt, as event fields (none
    when it cleared nothing)."""
    edits = response.context_edits
    if not edits:
        return []
    uses = sum(int(edit.get("cleared_tool_uses", 0)) for edit in edits)
    tokens = sum(int(edit.get("cleared_input_tokens", 0)) for edit in edits)
    return ["cleared_tool_uses", uses, "cleared_input_tokens", tokens]


def error_attributes(exc: BaseException, settings: Settings) -> dict[str, AttributeValue | None]:
    """The class and the start of the message of ``exc``, secrets masked."""
    message = redact(str(exc), known_secrets(settings))
    return {"error": type(exc).__name__, "error_message": message[:SPAN_ERROR_CHARS]}
