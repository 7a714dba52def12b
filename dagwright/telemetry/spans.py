"""The span: one timed piece of a run's work, as recorded in the run's ``spans`` stream.

A run's trace is built from two sources. Its state transitions (the ``events`` stream) give
the run, node-attempt and LLM-call spans, and the retries, with no extra write on the hot
path. Work the events do not see (tool calls, sandbox executions, breaker events) is
recorded as ``Span`` entries, one JSON object each under the stream field ``span``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

AttributeValue = str | int | float | bool

SPAN_FIELD = "span"

# Span names: what the trace tree, the Gantt chart and the OTLP export call each kind.
RUN = "run"
NODE_ATTEMPT = "node.attempt"
LLM_CALL = "llm.call"
TOOL_CALL = "tool.call"
SANDBOX_EXEC = "sandbox.exec"
RETRY = "node.retry"  # zero-length: the node failed and will be retried
BREAKER = "breaker"  # zero-length: a breaker opened, refused a call, or closed again
MCP_RESTART = "mcp.restart"  # an MCP server stopped answering a call and was restarted


def attempt_span_id(node_id: str, attempt: int) -> str:
    """The id of a node attempt's span: spans recorded inside it name it as parent."""
    return f"{node_id}#{attempt}"


class Span(BaseModel):
    """One timed piece of work (``end == start`` for a point event such as a retry)."""

    model_config = ConfigDict(frozen=True)

    span_id: str
    parent_id: str | None = None  # None: a child of the run span
    name: str
    node: str | None = None
    attempt: int | None = None
    start: datetime
    end: datetime
    status: Literal["ok", "error"] = "ok"
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        return (self.end - self.start).total_seconds()
