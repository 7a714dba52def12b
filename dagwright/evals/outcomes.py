"""A case run's facts, as scorers read them: its output and its record, not its words.

Behaviour is read from what the run stored: tool calls from its ``tool.call`` spans (each
call an agent asked for, with the policy's decision), node types from its nodes, dead
letters from its events (a failure for good names its DLQ entry), cost and tokens from
its usage, time from its timestamps. What a model *says* it did counts for nothing here.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dagwright.models import NodeStatus, RunStatus
from dagwright.telemetry.spans import TOOL_CALL

if TYPE_CHECKING:
    from dagwright.client import Client
    from dagwright.models import RunState
    from dagwright.telemetry.run_trace import Trace

RAN = frozenset({NodeStatus.SUCCEEDED, NodeStatus.FAILED})
"""Node states that mean the node's work ran (a cancelled or skipped node's did not)."""
REFUSED_OUTCOMES = frozenset({"denied", "rejected"})


@dataclass(frozen=True)
class ToolCalls:
    """How often each tool was asked for, and how often it ran (the policy allowed it)."""

    asked: Counter[str] = field(default_factory=Counter)
    ran: Counter[str] = field(default_factory=Counter)

    @classmethod
    def of(cls, trace: Trace) -> ToolCalls:
        asked: Counter[str] = Counter()
        ran: Counter[str] = Counter()
        for span in trace.spans:
            if span.name != TOOL_CALL:
                continue
            tool = str(span.attributes.get("tool", ""))
            asked[tool] += 1
            if span.attributes.get("outcome") not in REFUSED_OUTCOMES:
                ran[tool] += 1
        return cls(asked, ran)


@dataclass(frozen=True)
class CaseOutcome:
    """One case run as its scorers see it."""

    run_input: dict[str, Any]
    """What the case gave its run (inputs, goal, context)."""
    state: RunState
    tool_calls: ToolCalls
    dead_letters: int

    @property
    def succeeded(self) -> bool:
        return self.state.status == RunStatus.SUCCEEDED

    @property
    def output(self) -> Any:
        """The run's result (the output node's output, or a dict by node id)."""
        return self.state.result

    def node_output(self, node: str) -> Any:
        found = self.state.nodes.get(node)
        if found is None:
            raise LookupError(f"the run has no node {node!r}")
        return found.output

    def node_types_ran(self) -> Counter[str]:
        return Counter(node.type for node in self.state.nodes.values() if node.status in RAN)

    @property
    def cost_usd(self) -> float | None:
        return self.state.usage.known_cost_usd

    @property
    def tokens(self) -> int:
        return self.state.usage.total_tokens

    @property
    def duration_s(self) -> float | None:
        end = self.state.finished_at
        return None if end is None else (end - self.state.created_at).total_seconds()

    def failure(self) -> str:
        """Why the run did not succeed, in a line."""
        if self.state.reason:
            return f"the run {self.state.status.value}: {self.state.reason}"
        for node_id, node in self.state.failed_nodes().items():
            message = node.error.message if node.error else "failed"
            return f"the run failed: node {node_id}: {' '.join(message.split())[:200]}"
        return f"the run {self.state.status.value}"


def read_outcome(client: Client, run_id: str, run_input: dict[str, Any]) -> CaseOutcome:
    """A finished run's outcome, read from its state, trace and events."""
    state = client.status(run_id)
    return CaseOutcome(
        run_input=run_input,
        state=state,
        tool_calls=ToolCalls.of(client.trace(run_id)),
        dead_letters=dead_letters_of(client, run_id),
    )


def dead_letters_of(client: Client, run_id: str) -> int:
    """How many of the run's nodes went to the DLQ: each failure for good says so in its
    ``node.failed`` event (the entry's id), so the run's own events tell, not a scan of
    the whole DLQ stream (a month of every run's dead letters)."""
    events = client.events(run_id, follow=False)
    return sum(e.kind == "node.failed" and bool(e.data.get("dead_letter")) for e in events)
