"""The API's resources as the OpenAPI document states them: one model per shape that
``json_views`` (and the models it dumps) emit, field for field.

Documentation only: the routes send the views' dicts as they are (``payloads.py``), and
``openapi.documented`` names these models in the document. So a field added to a view
must be added here (``tests/test_api_openapi.py`` compares every served field with these
models). Where a view dumps a model of its own (``RunCounts``, ``Budget``, ``Span``,
``Trace``, ``Approval``, ``DeadLetter``...), that model is named, not copied.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field
from pydantic.json_schema import JsonDict

from dagwright.client.node_detail import LLMCall
from dagwright.client.tokens import Scope
from dagwright.dlq import Classification, DeadLetter, DeadLetterStats, DeadLetterStatus
from dagwright.dlq.entries import RawMessage
from dagwright.evals.baselines import Comparison
from dagwright.evals.results import CaseResult, EvalRecord, EvalStatus, ScorerStats
from dagwright.models import (
    Approval,
    ApprovalStatus,
    Budget,
    NodeStatus,
    NodeWait,
    RunCounts,
    RunStatus,
    Usage,
    Webhook,
)
from dagwright.schedules.definition import Catchup, Overlap
from dagwright.telemetry.run_trace import Trace
from dagwright.telemetry.spans import Span

__all__ = [
    "ApprovalRequest",
    "Caller",
    "DeadLetter",
    "DeadLetterStats",
    "DeadLetterSummary",
    "Eval",
    "EvalComparison",
    "EvalSummary",
    "Health",
    "NodeDetail",
    "Purged",
    "ReplayOutcome",
    "Run",
    "RunResult",
    "RunsPage",
    "ScheduleDefinition",
    "ScheduleFire",
    "ScheduleRemoved",
    "ScheduleState",
    "Trace",
    "WorkerType",
]


class Resource(BaseModel):
    """A shape the server emits (its fields all present, some null)."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=True)


class SpendUsage(Usage):
    """Tokens and cost (``json_views.usage_json``): ``cost_usd`` is null when part of it
    is unpriced (``unpriced_tokens``), ``priced_cost_usd`` its known part."""

    cost_usd: float | None = None  # type: ignore[assignment]
    priced_cost_usd: float = 0.0


class NodeFailure(Resource):
    """Why a failed node failed."""

    model_config = ConfigDict(populate_by_name=True)

    error_class: str = Field(alias="class")
    message: str


class NodeWaiting(NodeWait):
    """What a parked node waits on, and that said for people."""

    description: str


class RunNode(Resource):
    """A node of a run (``json_views.node_json``)."""

    status: NodeStatus
    type: str
    depends_on: list[str]
    output: Any
    attempts: int
    started_at: datetime | None
    finished_at: datetime | None
    error: NodeFailure | None
    usage: SpendUsage | None
    waiting: NodeWaiting | None


class RunSummary(Resource):
    """A run without its nodes (a row of ``GET /runs``)."""

    run_id: str
    status: RunStatus
    goal: str
    created_at: datetime | None
    finished_at: datetime | None
    counts: RunCounts
    result: Any
    usage: SpendUsage
    budget: Budget | None
    reason: str | None
    response_cache: bool
    inputs: dict[str, Any] | None
    tearing_down: Literal["cancelled", "failed"] | None
    """Set while a stopped run runs its ``run_if: always`` nodes: how it will end."""


class Run(RunSummary):
    """A run, as ``dagwright status --json`` prints it (``json_views.run_json``)."""

    nodes: dict[str, RunNode]


class RunsPage(Resource):
    """Runs, newest first, and the cursor of the next page (null on the last)."""

    runs: list[RunSummary]
    next_cursor: str | None


class RunResult(Resource):
    """The result of a succeeded run."""

    run_id: str
    result: Any


class NodeDetail(RunNode):
    """One node in full: its state, spec, inputs, transcript, LLM calls and spans."""

    run_id: str
    node_id: str
    spec: dict[str, Any]
    inputs: dict[str, Any]
    transcript: list[dict[str, Any]]
    llm_calls: list[LLMCall]
    spans: list[Span]


def with_status(schema: JsonDict) -> None:
    """``approval_json`` adds the request's status (a property of ``Approval``)."""
    properties = schema["properties"]
    required = schema.setdefault("required", [])
    assert isinstance(properties, dict) and isinstance(required, list)
    properties["status"] = {"type": "string", "enum": [status.value for status in ApprovalStatus]}
    required.append("status")


class ApprovalRequest(Approval):
    """A request waiting for a person, or decided (``json_views.approval_json``)."""

    model_config = ConfigDict(
        json_schema_extra=with_status, json_schema_serialization_defaults_required=True
    )


class DeadLetterSummary(Resource):
    """A dead letter in a list: no traceback, no node spec (``letter_json``)."""

    id: str
    run_id: str
    node_id: str
    fence: int
    worker_type: str
    attempts: int
    classification: Classification
    error_class: str
    message: str
    first_failure_at: datetime
    last_failure_at: datetime
    status: DeadLetterStatus
    raw_message: RawMessage | None


class ReplayOutcome(Resource):
    """What became of a replayed dead letter (``ReplayResult.to_json``)."""

    id: str
    run_id: str
    node_id: str
    replayed: bool
    reopened: bool
    reason: str
    warning: str


class Purged(Resource):
    purged: int


class ScheduleFire(Resource):
    """One tick of a schedule and what it did."""

    tick: str
    fired_at: datetime
    outcome: str
    run_id: str
    reason: str


class ScheduleDefinition(BaseModel):
    """A schedule as stored: fields that are not set are left out."""

    name: str
    cron: str | None = None
    every_s: float | None = None
    timezone: str
    goal: str | None = None
    plan: dict[str, Any] | None = None
    worker_types: list[str] | None = None
    budget: Budget | None = None
    budget_tokens: int | None = None
    inputs: dict[str, Any] | None = None
    overlap: Overlap
    catchup: Catchup
    catchup_grace_s: float
    max_followups: int
    followup_depth: int
    webhooks: list[Webhook]
    llm_batch: bool
    paused: bool
    created_at: datetime


class ScheduleState(ScheduleDefinition):
    """A schedule with its next fire, its last run and its recent fires (newest first)."""

    next_fire_at: datetime | None
    last_run_id: str | None
    last_run_status: RunStatus | None
    history: list[ScheduleFire]


class ScheduleRemoved(Resource):
    removed: str


class Health(Resource):
    status: str
    version: str


class Caller(Resource):
    """Who is asking: a cookie session's CSRF token, which the dashboard sends back."""

    name: str
    scope: Scope
    anonymous: bool
    csrf_token: str | None


class McpServerProbe(Resource):
    """Whether an MCP server attached to a type answered, and with which tools."""

    server: str
    answers: bool
    tools: list[str]
    problem: str


class WorkerType(Resource):
    """A registered worker type (``client.catalog.describe``)."""

    name: str
    kind: str
    """``agent``, ``function``, ``python``, ``celery_task``, ``custom``, or a plugin's."""
    queue: str
    model: str | None
    tools: list[str]
    not_offered: list[str]
    capabilities: list[str] | None
    mcp_servers: list[McpServerProbe]
    skills: list[str] = []
    """Agent types: the skills (``skill_dirs``) their system prompt lists."""
    description: str
    function_queues: dict[str, list[str]]
    """Function types: each ``queue=`` queue and the functions declared on it."""


class RatedScorerStats(ScorerStats):
    """A scorer's statistics with its pass rate (``reports.report_json``)."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def pass_rate(self) -> float:
        return super().pass_rate


class JudgeRequests(Resource):
    """Verdicts asked of the judge model, read from its cache, and what they cost."""

    asked: int
    cached: int
    cost_usd: float


class Eval(Resource):
    """One eval, as ``dagwright evals show --json`` prints it (``reports.report_json``)."""

    record: EvalRecord
    results: list[CaseResult]
    stats: list[RatedScorerStats]
    case_stats: dict[str, list[RatedScorerStats]]
    cost_usd: float | None
    judge: JudgeRequests
    comparison: Comparison | None


class EvalSummary(Resource):
    """An eval in a list: its record without suite and plan, and its figures
    (``json_views.eval_summary_json``)."""

    id: str
    suite: str
    suite_digest: str
    suite_file: str
    started_at: datetime
    finished_at: datetime | None
    status: EvalStatus
    cases: list[str]
    scorers: dict[str, list[str]]
    repeat: int
    changes: dict[str, Any]
    baseline: str | None
    duration_s: float | None
    runs: int
    runs_passed: int
    scores: int
    scores_passed: int
    pass_rate: float | None
    cost_usd: float | None
    judge_cost_usd: float


class EvalComparison(Comparison):
    """An eval beside its baseline (``json_views.comparison_json``)."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=True)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def regressed(self) -> bool:
        return super().regressed

    @computed_field  # type: ignore[prop-decorator]
    @property
    def worse_cases(self) -> list[str]:  # type: ignore[override]
        """The cases in which some scorer got worse."""
        return super().worse_cases()


class MemoryNamespace(Resource):
    """A memory namespace in a list (``memory ls --json``)."""

    name: str
    files: int
    bytes: int
    updated_ms: int
    """Epoch ms of its last write."""


class MemoryFiles(Resource):
    """A memory namespace's files (``memory show``, ``memory export``): path -> text."""

    format: str
    namespace: str
    files: dict[str, str]


class MemoryImported(Resource):
    namespace: str
    files: int
    """How many files the namespace holds now."""


class MemoryWrite(Resource):
    """One memory write of a run's node (its tool_use id after the node's)."""

    call: str
    """``<node>/<tool_use_id>``."""
    namespace: str
    command: str
    paths: list[str]
    result: str
