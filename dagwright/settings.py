"""One typed settings object for every dagwright process.

Precedence, highest first: a command-line flag (the CLI passes it to ``Settings(...)``),
an environment variable ``DAGWRIGHT_<NAME>``, the TOML file named by
``DAGWRIGHT_CONFIG_FILE`` (which must exist if set; default ``./dagwright.toml``, if
there is one), then the defaults below. The object is passed to whatever needs it;
nothing reads a module-level global.

Code that needs only one group of settings (the sandbox, the LLM client, the http_get
tool, the planner's bounds) is given that group's frozen view (``settings.sandbox``,
``settings.llm``, ``settings.http_tool``, ``settings.planner_bounds``), built from
``Settings`` on each read: ``Settings`` stays the one source, and the group's code and
tests name only what it uses.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from dagwright.errors import ConfigurationError
from dagwright.rates import checked_rates

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable


def default_data_dir() -> Path:
    """Per-user data directory (XDG): the embedded Valkey's files and the stack file."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "dagwright"


class ModelPrice(BaseModel):
    """USD per million tokens of one model.

    Prompt-cache rates default to the published multiples of ``input`` (a 5-minute write
    1.25x, a 1-hour write 2x, a read 0.1x); give them where a model's differ.
    """

    model_config = ConfigDict(frozen=True)

    input: float
    """Fresh input tokens."""
    output: float
    """Output tokens (thinking included)."""
    cache_read: float | None = None
    """Cache hits and refreshes (default: 0.1x ``input``)."""
    cache_write: float | None = None
    """Cache writes with the 5-minute lifetime (default: 1.25x ``input``)."""
    cache_write_1h: float | None = None
    """Cache writes with the 1-hour lifetime (default: 2x ``input``)."""

    @property
    def cache_read_rate(self) -> float:
        return self.input * 0.1 if self.cache_read is None else self.cache_read

    @property
    def cache_write_5m_rate(self) -> float:
        return self.input * 1.25 if self.cache_write is None else self.cache_write

    @property
    def cache_write_1h_rate(self) -> float:
        return self.input * 2 if self.cache_write_1h is None else self.cache_write_1h


class LLMRateLimit(BaseModel):
    """How much of one model the whole deployment may use per ``llm_rate_window_s``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    requests_per_minute: int | None = Field(None, ge=1)
    """LLM calls per window (None: not limited)."""
    tokens_per_minute: int | None = Field(None, ge=1)
    """Tokens per window: input (cache reads and writes included) plus output."""


MCP_SERVER_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,19}$"
_VERSION_CLAUSE = r"(===?|~=|!=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+"
REQUIREMENT = re.compile(
    rf"[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*\])?"
    rf"(\s*{_VERSION_CLAUSE}(\s*,\s*{_VERSION_CLAUSE})*)?"
)
"""A requirement of ``sandbox_packages``: a name on the index, its extras, its versions."""
"""Short, and without ``_``: ``mcp__<server>__<tool>`` must stay a valid, unambiguous tool
name of the Messages API (``^[a-zA-Z0-9_-]{1,64}$``)."""


class McpServerSettings(BaseModel):
    """One MCP server: a command started over stdio, or a streamable-HTTP ``url``.

    Secrets never sit here: ``env`` and ``headers`` name environment variables of the
    worker, whose values are passed to the server and masked in every trace, audit
    entry, dead letter and log (``dagwright.redaction``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: str | None = None
    """Executable of a stdio server (e.g. ``mcp-server-time``), found on ``PATH``."""
    args: list[str] = Field(default_factory=list)
    """Its command-line arguments."""
    cwd: Path | None = None
    """Its working directory (default: the worker's)."""
    env: list[str] = Field(default_factory=list)
    """Names of environment variables of the worker passed on to the server (it gets
    only these, beside ``PATH``, ``HOME`` and the like). Their values count as secrets."""
    url: str | None = None
    """Endpoint of a streamable-HTTP server (e.g. ``http://127.0.0.1:8000/mcp``)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers of a ``url`` server: header name -> name of the environment variable
    holding its value (e.g. ``{"Authorization": "GITHUB_MCP_AUTH"}``)."""
    timeout_s: float = Field(30.0, gt=0)
    """Longest one tool call may take."""
    startup_timeout_s: float = Field(20.0, gt=0)
    """Longest the server may take to start and answer ``initialize`` and ``tools/list``."""
    max_output_chars: int = Field(20_000, ge=100)
    """A tool result longer than this is cut before the model sees it."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (a stdio server) or `url` (streamable HTTP)")
        if self.headers and self.url is None:
            raise ValueError("`headers` are for a `url` server")
        return self

    def secret_values(self) -> list[str]:
        """The values of the environment variables it names, as this process has them."""
        names = [*self.env, *self.headers.values()]
        return [os.environ[name] for name in names if os.environ.get(name)]


class McpToolRule(BaseModel):
    """A policy rule on the MCP tools of an agent type (as ``PolicyRule``, for MCP tools
    only): tried before the type's own rules, first match wins, and a call no rule
    matches is denied."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    """Namespaced tool name or glob: ``mcp__time__*``, ``mcp__git__git_log``."""
    action: Literal["allow", "deny", "require_approval"]
    """What happens to a matching call."""
    when: dict[str, str] = Field(default_factory=dict)
    """Argument name -> glob its value must match (all of them)."""
    reason: str = ""
    """Why: shown to the model when the call is refused, and audited."""

    @field_validator("tool")
    @classmethod
    def _mcp_tools_only(cls, tool: str) -> str:
        # They cannot widen what a type may do with dagwright's own tools.
        if not tool.startswith("mcp__"):
            raise ValueError(
                f"rules of agent_mcp name MCP tools only (mcp__<server>__<tool> or a glob "
                f"such as mcp__time__*), not {tool!r}"
            )
        return tool


class AgentMcpSettings(BaseModel):
    """The MCP servers attached to one agent type, and the rules on their tools."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    servers: list[str] = Field(default_factory=list)
    """Names of ``mcp_servers`` whose tools the type is offered."""
    rules: list[McpToolRule] = Field(default_factory=list)
    """Policy rules on those tools. None: every call is denied (deny by default)."""


MEMORY_NAMESPACE_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,62}$"
"""A named memory namespace (``team-digest``): the pattern of schedule names. The names
dagwright derives (``schedule:<name>``, ``run:<id>``) hold a ``:``, so none is taken."""


class MemoryToolRule(BaseModel):
    """A policy rule on the memory tool of an agent type (as ``PolicyRule``, for the
    ``memory`` tool only): tried before the type's own rules, first match wins, and a call
    no rule matches is denied. ``when`` matches the command's fields, e.g. ``{command =
    "view"}``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: Literal["memory"] = "memory"
    """Always ``memory``: these rules cannot widen what a type may do with other tools."""
    action: Literal["allow", "deny", "require_approval"]
    """What happens to a matching call."""
    when: dict[str, str] = Field(default_factory=dict)
    """Argument name -> glob its value must match (all of them): ``command``, ``path``..."""
    reason: str = ""
    """Why: shown to the model when the call is refused, and audited."""


class AgentMemorySettings(BaseModel):
    """The memory tool of one agent type: offered when this entry exists."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    namespace: str | None = Field(None, pattern=MEMORY_NAMESPACE_PATTERN)
    """A named namespace every node of the type uses (a run's or schedule's own ``memory``
    wins). None: the schedule's for a scheduled run, else the run's."""
    read_only: bool = False
    """The type may view its memory, never change it: a write is refused, the reason told
    to the model."""
    rules: list[MemoryToolRule] = Field(default_factory=list)
    """Policy rules on the memory tool's commands. None: every call is denied (deny by
    default), as with any tool: ``[{action = "allow"}]`` allows them all."""


SKILL_TOOLS = ("load_skill", "read_skill_file", "run_skill_script")
"""The tools an agent type with skills is offered (``workers/tools/skills.py``)."""


class SkillToolRule(BaseModel):
    """A policy rule on the skill tools of an agent type (as ``PolicyRule``, for
    ``load_skill``, ``read_skill_file`` and ``run_skill_script`` only): tried before the
    type's own rules, first match wins. ``when`` matches the call's arguments, e.g.
    ``{skill = "release-notes"}``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: Literal["load_skill", "read_skill_file", "run_skill_script"]
    """Which skill tool: these rules cannot widen what a type may do with other tools."""
    action: Literal["allow", "deny", "require_approval"]
    """What happens to a matching call."""
    when: dict[str, str] = Field(default_factory=dict)
    """Argument name -> glob its value must match (all of them): ``skill``, ``script``..."""
    reason: str = ""
    """Why: shown to the model when the call is refused, and audited."""


class AgentSkillsSettings(BaseModel):
    """The skills attached to one agent type; a plain list is the skills alone
    (``researcher = ["release-notes"]``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    skills: list[str] = Field(default_factory=list)
    """Names of skills (folders of ``skill_dirs``) the type's catalog lists."""
    rules: list[SkillToolRule] = Field(default_factory=list)
    """Policy rules on the skill tools, tried before the ones attaching adds (loading a
    skill and reading its files allowed, running a script denied): ``[{tool =
    "run_skill_script", action = "allow"}]`` lets its scripts run in the sandbox."""

    @model_validator(mode="before")
    @classmethod
    def _list_is_skills(cls, value: Any) -> Any:
        return {"skills": value} if isinstance(value, list) else value


class Settings(BaseSettings):
    """dagwright's configuration. Every field is settable as ``DAGWRIGHT_<FIELD>``."""

    model_config = SettingsConfigDict(
        env_prefix="DAGWRIGHT_", extra="ignore", frozen=True, validate_default=True
    )

    redis_url: str | None = None
    """Run-state store. Unset: use a running ``dagwright up``, or (for ``dagwright run``)
    start an embedded Valkey for the duration of the command."""

    broker_url: str | None = None
    """Celery broker. Unset: the same server as ``redis_url``."""

    redis_username: str | None = None
    """ACL user of every Redis connection (state store, broker, the primary a Sentinel
    names) whose URL carries no credentials of its own."""

    redis_password: SecretStr | None = None
    """Password going with ``redis_username`` (or of the ``default`` user), for URLs
    without credentials: keeps it out of the URL, which commands print (redacted)."""

    redis_tls_ca_file: Path | None = None
    """CA bundle (PEM) that the server certificate of a ``rediss://`` or ``sentinels://``
    URL must chain to. Unset: the system's trusted CAs."""

    redis_tls_cert_file: Path | None = None
    """Client certificate (PEM) for servers that require one (``tls-auth-clients yes``)."""

    redis_tls_key_file: Path | None = None
    """Private key (PEM) of ``redis_tls_cert_file``."""

    redis_tls_cert_reqs: Literal["required", "optional", "none"] = "required"
    """Whether the server's certificate must be valid. ``none`` turns verification off:
    encrypted, but open to a man in the middle (only for tests)."""

    redis_tls_check_hostname: bool = True
    """Whether the server's certificate must name the host of the URL."""

    redis_sentinel_password: SecretStr | None = None
    """Password of the Sentinels themselves (``requirepass`` in sentinel.conf), when they
    have one; the primary's credentials come from the URL or ``redis_username`` /
    ``redis_password``."""

    key_prefix: str = "dw:"
    """Prefix of every key dagwright writes, so several deployments can share one Redis."""

    imports: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Modules imported at start-up by workers and clients, to register your functions and
    worker types (comma-separated in the environment)."""

    celery_app: str | None = Field(None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
    """Your team's own Celery app, as ``module:attribute`` (``myproject.celery:app``;
    ``celery_app`` in dagwright.toml): ``celery_task`` nodes send their tasks through it,
    by name, to your workers (your routing, rate limits, time limits and retries apply).
    It must have a result backend and use JSON only. Unset: plans with ``celery_task``
    nodes are refused. Workers serving ``celery_task`` import it; so does the reconciler,
    which reads the tasks' results and revokes those of stopped runs."""

    celery_task_poll_s: float = Field(30.0, gt=0, le=3600)
    """The longest a ``celery_task`` node stays parked before a worker looks at its task
    itself: the reconciler wakes it as soon as the task's result is in (every pass), so
    this is only the backstop (a node is also woken at its ``timeout_s``, to revoke the
    task and time out)."""

    max_nodes: int = Field(10_000, ge=1)
    """Largest plan accepted."""

    max_plan_file_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    """Largest plan file read, in bytes: checked before it is parsed, so that an oversized
    file costs no memory."""

    max_plan_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    """Largest plan accepted, in bytes of the JSON it is stored as (from a file, a caller
    or the planner). Shared references (YAML aliases, a Python list used twice) count as
    often as they appear, since that is how they are written out."""

    max_params_bytes: int = Field(1024 * 1024, ge=1024)
    """Largest ``params`` of one node, in bytes of JSON (pass bigger data as a node's
    output, or a file its worker reads)."""

    max_output_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    """Largest JSON output a node may produce; bigger outputs fail the node."""

    # Dynamic fan-out (a node's `map:`, plans/mapping.py).
    map_max_items: int = Field(1000, ge=1, le=100_000)
    """Most children one mapped node may spawn (its ``map.max_items`` defaults to this and
    may not exceed it): a list longer than the node's bound fails it (or is cut, with
    ``map.truncate``). The joined output of the children must still fit
    ``max_output_bytes``."""

    default_timeout_s: float = Field(3600.0, gt=0)
    """Execution time limit of a node whose plan sets no ``timeout_s``."""

    max_timeout_s: float = Field(6 * 3600.0, gt=0)
    """Largest ``timeout_s`` a plan may ask for; the broker's visibility timeout is twice this."""

    teardown_timeout_s: float = Field(300.0, gt=0)
    """How long a cancelled or timed-out run stays open for its teardown nodes (``run_if:
    always``) before they are cancelled too and the run ends (each node's own
    ``timeout_s`` also applies). Recorded in each run at submit."""

    approval_timeout_s: float = Field(24 * 3600.0, gt=0)
    """How long an approval request waits for a person before it counts as rejected
    (a node's ``approval_timeout_s`` overrides it)."""

    worker_wait_grace_s: float = Field(5.0, ge=0)
    """How long a queued node whose queue no live worker consumes goes unflagged: a worker
    starting (the embedded stack's, a rollout's) is not reported as missing. Past it,
    ``status``, ``watch``, the API and the dashboard say the node waits for a worker."""

    lease_s: float = Field(10.0, gt=0)
    """A running node's lease; its worker renews it. An expired lease re-queues the node."""

    heartbeat_interval_s: float = Field(2.0, gt=0)
    """How often a worker renews the leases of the nodes it runs."""

    reconcile_interval_s: float = Field(2.0, gt=0)
    """How often the reconciler looks for expired leases, due retries and lost publishes.
    A reconciler holds its buckets of active runs for 3 times this (its lease): one that
    dies has its buckets taken over by the others after that long."""

    # Reconcilers sharing the active runs (issue 31; orchestrator/execution/buckets.py).
    reconciler_buckets: int = Field(16, ge=1, le=1024)
    """Buckets the active runs are split into, each leased by one reconciler at a time:
    the most reconcilers that can share the work. Every reconciler of a deployment must
    use the same number (a change takes effect as the old ones stop)."""
    reconcile_max_runs_per_pass: int = Field(10_000, ge=1)
    """Most active runs one reconciler visits in a pass: past it, its next passes go on
    where this one stopped, so one pass stays bounded however many runs are open."""
    backlog_recount_interval_s: float = Field(60.0, ge=0)
    """How often the reconciler holding bucket 0 counts the runs' pools again to repair
    the pooled-nodes counter (keys.pooled_nodes) if anything drifted it; 0: never.
    O(active runs) of Valkey time in one step."""

    publish_grace_s: float = Field(5.0, gt=0)
    """A queued node whose message was not confirmed published after this is published again."""

    stranded_after_s: float = Field(20.0, gt=0)
    """A queued node not claimed after this, while its queue is empty, is published again."""

    eager_dispatch: bool = True
    """A worker runs a node that a success readied itself, without publishing its message,
    when it serves that node's queue and the message it serves has time left (see
    orchestrator/execution/eager.py; Flower still lists such a node, from the task events
    the worker sends for it); and it pulls the nodes of a big fan-out, which get a message
    only per worker slot (orchestrator/execution/pool.py). Off: every node is a Celery
    message of its own."""

    # Priorities and fairness (docs/internals/priorities-and-fairness.md).
    priority_aging_s: float = Field(120.0, ge=0)
    """A node whose message has waited this long for a worker (a lower priority behind a
    steady stream of higher ones) is published again ahead of every priority, so no
    priority waits forever; 0 turns aging off (strict priorities)."""
    priority_aging_per_pass: int = Field(100, ge=1)
    """Most nodes of one run a reconciler pass lifts by aging: a backlog older than
    ``priority_aging_s`` goes ahead in slices, not as a flood of second messages."""

    fair_dispatch: bool = True
    """A worker running a chain or pulling a fan-out of one run hands its next node back to
    the broker, instead of running it at once, when another run's message waits in a
    queue it consumes and that run has fewer nodes running than its own has on other
    workers (or as many, after 0.1 s of this worker's message): one run's backlog cannot
    hold the workers while other runs wait (orchestrator/execution/fairness.py). Off: a
    worker keeps serving its run for the few seconds eager continuation allows."""

    retention_s: int = Field(7 * 24 * 3600, ge=60)
    """How long every key of a finished run is kept."""

    # Retention of what a finished run keeps (orchestrator/runstate/lua/compact.lua,
    # docs/internals/retention.md). Each is at most ``retention_s``; None: as long as the run.
    checkpoint_retention_s: int | None = Field(0, ge=0)
    """How long a succeeded run keeps its nodes' checkpoints (an agent's conversation,
    shown as the node's transcript) after it ends: 0 drops them at its end (the node's
    detail says so), None keeps them as long as the run. A failed or cancelled run keeps
    them as long as itself: a replay resumes its agents from them."""
    events_retention_s: int | None = Field(None, ge=60)
    """How long a finished run keeps its event stream (what ``watch``, the dashboard's
    events and the trace's attempts are read from); None: as long as the run."""
    trace_retention_s: int | None = Field(None, ge=60)
    """How long a finished run keeps its recorded spans (tool calls, sandbox runs,
    breaker events in its trace); None: as long as the run."""
    run_max_age_s: int | None = Field(7 * 24 * 3600, ge=60)
    """Oldest a run may get without finishing: past it (from its creation, or its last
    re-opening by a replay) the reconciler fails its nodes still at work, each with a
    dead letter saying so (``dlq replay`` re-opens the run), and the run ends failed
    with that reason. None: no bound (a run with a ``timeout_s`` is bounded by it too)."""

    events_maxlen: int = Field(100_000, ge=100)
    """Approximate cap of a run's event stream."""

    run_scores_max: int = Field(1000, ge=1, le=100_000)
    """Most scores one run may hold (``Client.score``, ``POST /api/v1/runs/{id}/scores``):
    past it a score is refused (ScoreLimitError, HTTP 422), so that feedback cannot grow a
    run's keys without end. They expire with the run."""

    # Node logs (telemetry/node_logs.py; `dagwright logs`, docs/client-guide.md "Node logs").
    node_log_max_bytes: int = Field(65_536, ge=0, le=16 * 1024 * 1024)
    """Most bytes of logs kept per node attempt (its stdout, stderr, ``logging`` records
    and an agent's notable events); past it the rest is counted and a ``… truncated N
    bytes`` line closes the attempt's logs. 0 keeps none (capture off)."""
    node_log_max_line_chars: int = Field(2_000, ge=80, le=100_000)
    """Longest log line kept; a longer one is cut (and marked ``…``)."""
    node_log_run_max_lines: int = Field(100_000, ge=100)
    """Approximate cap of a run's log stream: past it the oldest lines are dropped, so a
    run of 10,000 chatty nodes stays bounded. The logs expire with the run."""

    worker_concurrency: int | None = Field(None, ge=1)
    """Processes per worker (default: the number of CPUs)."""

    data_dir: Path = Field(default_factory=default_data_dir)
    """Where the embedded Valkey keeps its data and the running stack is recorded."""

    anthropic_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("DAGWRIGHT_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY")
    )
    """API key of the Anthropic API (also read from ANTHROPIC_API_KEY)."""

    anthropic_base_url: str | None = Field(
        None, validation_alias=AliasChoices("DAGWRIGHT_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL")
    )
    """Another endpoint for the Messages API, e.g. `dagwright fake-llm` (ANTHROPIC_BASE_URL)."""

    default_model: str = "claude-sonnet-5-5"
    """Model of the agent worker types that name none."""

    model_lifecycle_date: dt.date | None = None
    """The day models' end of life is judged on (None: today, in UTC). A model within 30
    days of its end of life is warned about by ``doctor``, ``run``/``submit`` and the
    worker; one past it is refused, naming its replacement. Set a later day to rehearse a
    coming retirement (DAGWRIGHT_MODEL_LIFECYCLE_DATE=2026-12-01)."""

    model_prices: dict[str, ModelPrice] = Field(default_factory=dict)
    """USD per million tokens by model, for the cost of every call, node and run: ``input``,
    ``output``, and optionally ``cache_read``, ``cache_write`` (5-minute) and
    ``cache_write_1h`` (else 0.1x, 1.25x and 2x ``input``). Entries given are added to the
    published prices (``llm/pricing.py``; or replace theirs): this holds only those. A
    dated id or ``-latest`` alias is priced as its family. A model with no price is
    unpriced: its cost shows as unknown, and a run with a USD budget that would call it is
    refused at submit."""

    eval_judge_model: str | None = None
    """Model of an eval's LLM judge when its scorer names none (default: ``default_model``)."""

    eval_retention_s: int = Field(90 * 24 * 3600, ge=3600)
    """How long an eval's record and results are kept (its runs expire after
    ``retention_s``; the results keep their outputs, so a baseline outlives them)."""

    eval_judge_cache_ttl_s: int = Field(90 * 24 * 3600, ge=60)
    """How long a judge's verdict is kept for the same rubric, input, output and model."""

    planner_model: str | None = None
    """Model of the planner (default: ``default_model``)."""

    planner_max_repairs: int = Field(2, ge=0, le=10)
    """Times the planner may fix a rejected plan before the run fails."""

    planner_max_nodes: int = Field(30, ge=1)
    """Default limit on the nodes of a planned DAG (``--max-nodes``)."""

    planner_max_depth: int = Field(8, ge=1)
    """Default limit on the longest dependency chain of a planned DAG (``--max-depth``)."""

    planner_allow_approvals: bool = False
    """Let a planned node set ``approval: required`` (a person must approve it). Off: the
    planner is told to fix such a plan; plans you write are not limited."""

    planner_allow_python: bool = False
    """Let a goal's plan use ``python`` nodes (model-written code, run in the sandbox)
    when the goal names no worker types; a goal that lists ``python`` in ``-w`` /
    ``worker_types`` may always."""

    planner_max_attempts: int = Field(5, ge=1, le=100)
    """Most ``retry.max_attempts`` a planned node may ask for."""

    planner_max_timeout_s: float = Field(1800.0, gt=0)
    """Longest ``timeout_s`` a planned node may ask for (``max_timeout_s`` bounds every plan)."""

    planner_max_retry_delay_s: float = Field(300.0, ge=0)
    """Longest delay between two attempts that a planned node's ``retry`` may lead to."""

    planner_max_sleep_s: float = Field(300.0, ge=0)
    """Longest wait a planned node may ask of the built-in ``sleep`` function."""

    max_goal_chars: int = Field(10_000, ge=10)
    """Longest goal accepted: of a run of a goal, and a plan's ``goal``."""

    max_context_chars: int = Field(50_000, ge=0)
    """Longest ``--context`` of a goal accepted. It goes to the planner and, as background,
    to every agent of the run: its tokens are paid once per agent request."""

    replan_enabled: bool = False
    """Re-plan a failed branch by default (runs may say otherwise: ``--replan``)."""

    replan_max: int = Field(1, ge=1, le=10)
    """Re-plans a run may make."""

    breaker_fail_max: int = Field(5, ge=1)
    """Failures in a row that open a dependency's circuit breaker."""

    breaker_reset_timeout_s: float = Field(30.0, gt=0)
    """How long an open breaker stays open before letting probes through."""

    breaker_max_probes: int = Field(1, ge=1)
    """Calls let through at once while a breaker is half-open, over every worker."""

    breaker_max_wait_s: float = Field(300.0, gt=0)
    """Longest time a node waits on open breakers, one open period after another, before
    it fails into the DLQ (``BreakerWaitExpiredError``; replay it once the dependency is
    back). No node waits for ever on a dependency that stays down."""

    max_deliveries: int = Field(3, ge=1)
    """Deaths of the process running a node, without any recorded outcome in between, after
    which it is failed as a poison message and dead-lettered. Only deaths its worker's
    surviving parent saw count (a prefork child killed by a signal, an OOM kill, a hard
    time limit): a worker lost whole (a host lost, an eviction, a SIGKILL of its process
    group) is no fault of the node's, and its node is delivered again after
    ``worker_loss_backoff_s``. (With the ``threads`` or ``solo`` pool no parent survives a
    node that kills its process: such a node ends by ``max_worker_losses``.)"""

    worker_loss_backoff_s: float = Field(2.0, ge=0)
    """How long a node whose worker was lost (its lease expired: the worker died whole or
    hung) waits before it is delivered again, doubled after each further loss
    (``status`` shows the wait); 0: at once. The run's ``timeout_s`` bounds the waits."""

    worker_loss_backoff_max_s: float = Field(60.0, ge=0)
    """The longest ``worker_loss_backoff_s`` grows to."""

    max_worker_losses: int = Field(20, ge=1)
    """Workers a node may lose under it without any recorded outcome in between; at the
    next delivery it fails (``WorkersLostError``, dead-lettered as ``permanent``) rather
    than wait for ever on a fleet that keeps dying."""

    dlq_retention_s: int = Field(30 * 24 * 3600, ge=3600)
    """How long dead letters are kept."""

    llm_provider: Literal["anthropic", "bedrock", "vertex"] = "anthropic"
    """Who serves the models: the Anthropic API (``anthropic_api_key``,
    ``anthropic_base_url``), Amazon Bedrock (AWS credentials from the environment: keys,
    ``AWS_PROFILE``...) or Google Vertex AI (application default credentials). Retries,
    breakers, rate limits and accounting are the same for each; model ids are the
    provider's (e.g. ``anthropic.claude-sonnet-5-5`` on Bedrock)."""

    llm_region: str | None = None
    """Region of Bedrock or Vertex AI (default: the SDK's, from ``AWS_REGION`` or
    ``CLOUD_ML_REGION``)."""

    llm_vertex_project_id: str | None = None
    """Google Cloud project of Vertex AI (default: ``ANTHROPIC_VERTEX_PROJECT_ID``)."""

    llm_connect_timeout_s: float = Field(5.0, gt=0)
    """Time to open a connection to the LLM API: short, since nothing that answers takes
    long to accept one."""

    llm_idle_timeout_s: float = Field(60.0, gt=0)
    """Longest silence between two events of a streamed LLM answer (the API sends ``ping``
    events while it works): a stream silent longer is stalled, and that counts as an
    outage of the model. Replaces one timeout of the whole call, which a long generation
    would exceed while making progress."""

    llm_min_tokens_per_s: float = Field(5.0, gt=0)
    """The slowest generation still waited for: one call's overall deadline is
    ``llm_idle_timeout_s + max_tokens / llm_min_tokens_per_s`` (4096 tokens: 15 min). A
    call past its deadline is ended and retried by the node, but is not an outage."""

    llm_max_attempts: int = Field(4, ge=1, le=20)
    """Attempts of one LLM call on 408/409/429/5xx/529 and connection errors (the only
    retry layer of an LLM call; the SDK's own retries are off)."""

    llm_retry_after_cap_s: float = Field(30.0, ge=0)
    """Longest wait honoured from a retry-after header."""

    llm_retry_backoff_s: float = Field(1.0, ge=0)
    """First delay between attempts of an LLM call without retry-after (doubles, jittered)."""

    llm_cache_enabled: bool = False
    """Let every agent's LLM requests be answered from the response cache in Redis (an
    identical earlier request's answer, without a call). Off: only the agent types that
    set ``response_cache`` use it."""

    llm_cache_ttl_s: int = Field(7 * 24 * 3600, ge=60)
    """How long a cached LLM response is kept."""

    llm_prompt_cache_ttl: Literal["5m", "1h", "off"] = "5m"
    """How long the API keeps the prompt prefixes an agent's requests mark for caching
    (tools, system, the conversation so far): ``5m`` (writes cost 1.25x input, refreshed
    by every read), ``1h`` (writes cost 2x; for agents whose turns are minutes apart, such
    as those waiting on approvals or slow tools) or ``off``."""

    llm_max_tokens_cap: int = Field(64_000, ge=1)
    """Largest ``max_tokens`` the one retry of an agent turn whose tool call was cut at
    ``max_tokens`` is made with (twice the turn's); also never more than the model's
    output limit. A cut text answer is continued instead."""

    agent_context_management: Literal["auto", "api", "summary", "off"] = "auto"
    """How an agent's conversation is kept within bounds as it grows: ``api`` clears older
    tool results through the Messages API's context editing (``clear_tool_uses``, beta);
    ``summary`` replaces older turns by a summary the model writes (one bounded call,
    checkpointed); ``auto`` uses ``api`` on the models that take it and ``summary`` on
    others; ``off`` keeps every turn (the context window, ``max_turns`` and the budget
    are then the only bounds)."""

    agent_context_trigger_tokens: int = Field(30_000, ge=1_000)
    """Input tokens of an agent's prompt past which its older tool results are cleared
    (``api``) or its older turns summarised (``summary``)."""

    agent_context_keep_tool_uses: int = Field(2, ge=0)
    """The latest tool calls whose results are always kept whole."""

    agent_context_clear_batch: int = Field(6, ge=1)
    """Tool results cleared together: the cleared part of the prompt then stays the same
    (and is read from the prompt cache) for that many turns, instead of changing, and
    being written again, every turn."""

    agent_context_summary_max_tokens: int = Field(4_096, ge=256)
    """``max_tokens`` of the call that summarises older turns (``summary``)."""

    llm_refusal_fallback_model: str | None = None
    """Model an agent turn is retried with when the model refuses (``stop_reason:
    refusal``), for agent types that name no ``fallback_model``; unset: a refusal fails
    the node."""

    llm_batch_types: list[str] = Field(default_factory=list)
    """Agent types whose LLM calls always go through the Message Batches API, at half
    the price and with answers within 24 hours (``llm/batches.py``); a run or schedule
    asks for it with ``llm_batch`` / ``--batch``. For work nobody waits on."""

    llm_batch_poll_s: float = Field(60.0, gt=0, le=3600)
    """How long a node waiting on its Message Batch stays parked between two polls."""

    llm_batch_max_wait_s: float = Field(24 * 3600.0, gt=0, le=7 * 24 * 3600)
    """Longest a node waits on one Message Batch; past it the batch is cancelled and the
    node dead-lettered (``BatchWaitExpiredError``). The API itself expires a batch after
    24 hours (the node then sends its call again, as a retry)."""

    llm_rate_limits: dict[str, LLMRateLimit] = Field(default_factory=dict)
    """Requests and tokens per minute by model id, over every worker, e.g.
    ``DAGWRIGHT_LLM_RATE_LIMITS='{"claude-sonnet-5-5": {"tokens_per_minute": 400000}}'``;
    ``"*"`` applies to each model not listed. A call waits for room, first come first
    served, up to ``llm_rate_max_wait_s``."""

    llm_rate_window_s: float = Field(60.0, gt=0)
    """The window of ``llm_rate_limits`` (a minute; tests shorten it)."""

    llm_rate_max_wait_s: float = Field(300.0, ge=0)
    """Longest an LLM call waits for its rate limit; then its node is retried later."""

    concurrency_limits: dict[str, int] = Field(default_factory=dict)
    """Most nodes of a worker type running at once over every worker, e.g.
    ``DAGWRIGHT_CONCURRENCY_LIMITS='{"researcher": 4}'``; a type not listed is not
    limited. Give every worker the same value. Nodes over the limit wait in order."""

    # Flow control waits (docs/internals/flow-control.md): delayed starts, rate limits, runs
    # per concurrency key. Each wait is bounded by one of these.
    max_start_delay_s: float = Field(30 * 24 * 3600.0, gt=0)
    """Furthest in the future a run's delayed start may be (``not_before``/``countdown_s``
    at submit); a later one is refused. A node's ``countdown_s`` is bounded by its plan."""

    rate_limits: Annotated[dict[str, str], AfterValidator(checked_rates)] = Field(
        default_factory=dict
    )
    """Most node starts per second, minute or hour over every worker, by
    ``function:<name>`` or ``type:<worker type>``, e.g.
    ``DAGWRIGHT_RATE_LIMITS='{"type:researcher": "10/m", "function:fetch_prices": "5/s"}'``
    (overrides a function's own ``rate_limit=``). A node over its rate holds no worker
    slot: it waits in RETRY_WAIT until its turn. Give every worker the same value."""

    rate_limit_max_wait_s: float = Field(600.0, gt=0)
    """Longest a node waits for its rate limits in all; then the attempt fails with a
    retryable error (RateLimitWaitExpiredError), retried as its retry policy says."""

    concurrency_key_max_wait_s: float = Field(24 * 3600.0, gt=0)
    """Longest a run waits for a place of its plan's concurrency key (from its
    submission); then it fails, saying so, without having started (its run timeout, if
    shorter, ends it first)."""

    http_allowed_domains: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Domains the http_get tool may fetch (``example.com`` also allows its subdomains);
    empty: none. Comma-separated in the environment."""

    web_search: bool = False
    """Offer the Messages API's server-side web search to the agent types that list
    ``web_search`` (the researcher): the API searches, dagwright runs nothing. Each search
    is billed (``web_search_usd_per_1k``). Not on Bedrock or Vertex AI."""

    web_search_max_uses: int = Field(5, ge=1)
    """Most searches of one LLM call (the API's ``max_uses``)."""

    web_search_allowed_domains: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Only these domains in search results (the API's ``allowed_domains``; a domain
    also covers its subdomains); empty: any. Not together with the blocked list."""

    web_search_blocked_domains: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Never these domains in search results (the API's ``blocked_domains``)."""

    web_search_usd_per_1k: float = Field(10.0, ge=0)
    """Price of 1,000 web searches in USD (the published $10), added to a call's cost."""

    web_fetch: bool = False
    """Offer the Messages API's server-side web fetch to the agent types that list
    ``web_fetch``: the API fetches a page or PDF whose URL the conversation holds (the
    model cannot make one up). Its content is billed as input tokens only."""

    web_fetch_max_uses: int = Field(5, ge=1)
    """Most fetches of one LLM call (the API's ``max_uses``)."""

    web_fetch_allowed_domains: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Only these domains may be fetched (the API's ``allowed_domains``); empty: any.
    Not together with the blocked list."""

    web_fetch_blocked_domains: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Never these domains (the API's ``blocked_domains``)."""

    web_fetch_max_content_tokens: int | None = Field(None, ge=1)
    """Cut a fetched page at about this many tokens (the API's ``max_content_tokens``);
    None: the API's default."""

    http_max_bytes: int = Field(1_000_000, ge=1024)
    """Largest response body http_get reads."""

    http_timeout_s: float = Field(15.0, gt=0)
    """Timeout of one http_get request."""

    workspace_backend: str = Field("redis", pattern="^(redis|disk)$")
    """Where the per-run workspace of the workspace tools lives: ``redis`` (shared by
    every worker host) or ``disk`` (under ``workspace_dir``, for one host)."""

    workspace_dir: Path | None = None
    """Root of disk workspaces (default: ``<data_dir>/workspaces``)."""

    workspace_max_bytes: int = Field(1_000_000, ge=1024)
    """Largest file the workspace tools write or read."""

    idempotency_ttl_s: int = Field(24 * 3600, ge=60)
    """How long a submit's idempotency key keeps returning the run it started."""

    beat_interval_s: float = Field(1.0, gt=0, le=60)
    """How often beat looks for due schedules (and extends its lock)."""

    beat_lock_timeout_s: int = Field(10, ge=2)
    """A beat that stops extending its lock for this long is replaced by a standby beat."""

    sandbox_backend: str = Field("auto", pattern="^(auto|docker|bubblewrap)$")
    """Where model-written code runs: ``docker``, ``bubblewrap``, or ``auto`` (the first
    of those two whose self-test passes). Never unsandboxed: with none, code is refused."""

    sandbox_image: str = "dagwright-sandbox:latest"
    """Docker image of the docker backend (``ops/docker/sandbox.Dockerfile``)."""

    sandbox_warm_pool: int = Field(0, ge=0, le=16)
    """docker backend: containers kept started and waiting for code (0: none), which cuts
    a run's start from about 0.3 s to 0.08 s."""

    sandbox_uid: int = Field(65534, ge=1)
    """Unprivileged uid (and gid) the sandboxed program runs as (never root)."""

    sandbox_python: Literal["system", "worker"] = "system"
    """Which interpreter python nodes and ``run_python`` get. ``system``: the host's
    ``python3`` with its standard library (and, bubblewrap, the ``sandbox_packages``
    virtualenv once installed). ``worker``: the worker's own interpreter
    and environment (its virtualenv's packages), mounted read-only in the sandbox, still
    with no network, no secrets and the same limits; bubblewrap backend only (a docker
    image has its own interpreter)."""

    sandbox_packages: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Packages the sandboxed code may import besides the standard library: requirement
    specifiers (``six``, ``attrs==23.2.0``; comma-separated, or a JSON list for
    specifiers with commas) installed ahead of time, never by the code (the sandbox has
    no network): by ``dagwright sandbox install`` into ``sandbox_packages_dir`` for
    bubblewrap, into the image for docker (``ops/docker/sandbox.Dockerfile``, build arg
    ``SANDBOX_PACKAGES``). The tools and prompts list what is actually installed."""

    sandbox_packages_dir: Path | None = None
    """bubblewrap: the virtualenv ``dagwright sandbox install`` builds the packages into,
    mounted read-only in the sandbox (default: ``<data_dir>/sandbox-packages``)."""

    sandbox_install_timeout_s: float = Field(600.0, gt=0)
    """How long ``dagwright sandbox install`` may take (pip included) before it stops."""

    sandbox_cgroup_parent: Path | None = None
    """bubblewrap: a cgroup v2 directory delegated to the worker (memory and pids
    controllers), made if missing, under which each run gets its cgroup. Unset: the
    worker's own cgroup in each hierarchy (which, on a pure cgroups v2 host, rarely offers
    controllers to children)."""

    sandbox_memory_fallback_tasks: int = Field(4, ge=0, le=64)
    """bubblewrap, where no memory cgroup can be made for a run: its memory is bounded as
    this many tasks (processes and threads; bwrap's own are extra) of
    ``sandbox_memory_mb`` / N address space each (RLIMIT_NPROC and RLIMIT_AS), so the whole
    tree stays within ``sandbox_memory_mb``. 0: refuse to run code without a memory
    cgroup. ``dagwright doctor`` says which bound is in force."""

    sandbox_wall_time_s: float = Field(30.0, gt=0)
    """Wall-clock limit of one execution."""

    sandbox_cpu_time_s: float = Field(30.0, gt=0)
    """CPU-time limit of one execution."""

    sandbox_memory_mb: int = Field(256, ge=16)
    """Memory of the whole process tree of one execution."""

    sandbox_pids: int = Field(64, ge=4)
    """Processes and threads of one execution."""

    sandbox_open_files: int = Field(64, ge=16)
    """Open files of each sandboxed process."""

    sandbox_file_size_mb: int = Field(16, ge=1)
    """Largest file a sandboxed program may write."""

    sandbox_scratch_mb: int = Field(64, ge=1)
    """Size of the sandbox's writable tmpfs."""

    sandbox_output_bytes: int = Field(1_000_000, ge=1024)
    """Stdout and stderr kept of one execution, each; the rest is dropped."""

    metrics_port: int | None = Field(None, ge=1, le=65535)
    """Port on which each worker serves Prometheus metrics at ``/metrics``; unset: none.
    ``dagwright metrics-server`` serves the same metrics on its own."""

    metrics_host: str = "0.0.0.0"
    """Address the metrics endpoints listen on."""

    trace_enabled: bool = True
    """Record spans (nodes, LLM calls, tool calls, sandbox runs, retries, breaker events)
    for ``dagwright trace``."""

    trace_maxlen: int = Field(100_000, ge=100)
    """Spans kept per run (the oldest are trimmed first)."""

    otlp_endpoint: str | None = None
    """OTLP/HTTP endpoint (e.g. ``http://collector:4318``) to export spans to as well; needs
    the ``opentelemetry`` extra. Unset: spans stay in Redis only."""

    egress_allow: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Where webhooks and the http_get tool may go though the egress filter refuses it by
    default (loopback, private, link-local, unique-local, multicast, reserved and cloud
    metadata addresses, ``localhost``): CIDRs (``10.0.0.0/8``, ``127.0.0.1``) and host
    names (trusted whatever they resolve to), comma-separated. Empty: only public
    addresses."""

    egress_resolve_timeout_s: float = Field(5.0, gt=0, le=60)
    """Bound of resolving the host of a webhook or http_get request (the egress filter
    checks every address it resolves to before connecting to one of them)."""

    webhook_secret: SecretStr | None = None
    """Key that signs webhooks whose ``secret_env`` is unset (``DAGWRIGHT_WEBHOOK_SECRET``);
    a webhook with neither is sent unsigned (its receiver cannot tell it from a forgery)."""

    webhook_timeout_s: float = Field(10.0, gt=0, le=120)
    """Bound of one webhook delivery attempt (connect, send and read the answer)."""

    webhook_max_attempts: int = Field(8, ge=1, le=100)
    """Attempts of one webhook delivery before it is given up (then ``redeliver`` it)."""

    webhook_backoff_s: float = Field(5.0, gt=0)
    """Delay after a delivery's first failed attempt; doubled after each one."""

    webhook_backoff_max_s: float = Field(3600.0, gt=0)
    """Longest delay between two attempts of a delivery."""

    webhook_max_age_s: float = Field(24 * 3600.0, gt=0)
    """A delivery still failing this long after its run ended is given up."""

    flower_basic_auth: SecretStr | None = None
    """``user:password`` (comma-separated for several) that ``dagwright flower`` requires."""

    flower_port: int = Field(5555, ge=1, le=65535)
    """Port of ``dagwright flower``."""

    server_host: str = "127.0.0.1"
    """Address ``dagwright server`` (the HTTP API and the dashboard) listens on."""

    server_port: int = Field(8400, ge=1, le=65535)
    """Port of ``dagwright server``."""

    server_session_ttl_s: int = Field(8 * 3600, ge=60)
    """How long a dashboard login lasts (its session cookie and its record in Redis)."""

    server_max_event_streams: int = Field(100, ge=1, le=10_000)
    """Event streams (SSE) ``dagwright server`` keeps open at once; one more is refused
    (503 with Retry-After). Each reads Redis over a connection of the streams' own pool
    (this many connections) in a thread of their own: open streams never take a
    connection or a thread that the API's other calls need."""

    server_max_event_streams_per_token: int = Field(20, ge=1)
    """Event streams one API token (its dashboard sessions included) keeps open at once;
    one more is refused (429 with Retry-After)."""

    server_max_request_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    """Largest request body ``dagwright server`` accepts, in bytes (the default is that of
    ``max_plan_bytes``: a submit carries its plan; raise both together). Refused (413)
    before the body is read, parsed or its sender authenticated."""

    server_trusted_proxies: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Addresses or networks (``10.0.0.5``, ``10.0.0.0/8``; comma-separated in the
    environment) of the reverse proxies in front of ``dagwright server``: only from these
    are ``X-Forwarded-Proto`` and ``X-Forwarded-For`` believed, so that a request that
    reached the proxy over https gets a ``Secure`` session cookie. Empty: none is."""

    server_keepalive_s: float = Field(15.0, gt=0)
    """Seconds between keep-alive comments of an idle event stream (SSE), so proxies and
    browsers do not take a quiet run for a dead connection."""

    mcp_plan_dir: Path | None = None
    """Directory whose plan files (``*.yaml``, ``*.yml``, ``*.json``) an MCP client may
    submit by name (``dagwright mcp`` and ``/mcp``: the ``plan_file`` of ``submit_run``).
    Unset: none may be, and no plan file is listed; only a file directly inside it, by a
    plain name, is read (no path, no link out of it)."""

    mcp_follow_max_s: float = Field(300.0, gt=0, le=3600)
    """Longest wait of one ``follow_run`` call of an MCP client, in seconds: it answers
    then with the run as it is (call it again to go on following)."""

    mcp_task_poll_ms: int = Field(1000, ge=100, le=60_000)
    """Polling interval the MCP server suggests to a client following a run as an MCP
    task (``pollIntervalMs``)."""

    mcp_servers: dict[str, McpServerSettings] = Field(default_factory=dict)
    """MCP servers by name (lowercase letters, digits, ``-``; 20 at most), e.g. in
    dagwright.toml ``[mcp_servers.time]`` ``command = "mcp-server-time"``. Each worker
    process starts a stdio server on first use and keeps it for every node after."""

    agent_mcp: dict[str, AgentMcpSettings] = Field(default_factory=dict)
    """MCP servers attached to agent types, by type name, with the policy rules on their
    tools: ``[agent_mcp.researcher]`` ``servers = ["time"]`` ``rules = [{tool =
    "mcp__time__*", action = "allow"}]``. Attaching offers the tools; only a rule lets a
    call through."""

    agent_memory: dict[str, AgentMemorySettings] = Field(default_factory=dict)
    """Agent types offered the memory tool (the Messages API's ``memory_20250818``), by
    type name, with their namespace and the policy rules on its commands:
    ``[agent_memory.digest]`` ``rules = [{action = "allow"}]``. Attaching offers the tool;
    only a rule lets a command through (docs/memory.md)."""

    skill_dirs: list[Path] = Field(default_factory=list)
    """Directories of Agent Skills: each folder directly inside one that holds a
    ``SKILL.md`` is a skill (docs/skills.md). Read when a process builds its registry; a
    malformed skill stops it there, with one line."""

    agent_skills: dict[str, AgentSkillsSettings] = Field(default_factory=dict)
    """Skills attached to agent types, by type name: ``[agent_skills]`` ``researcher =
    ["release-notes"]``, or ``[agent_skills.coder]`` ``skills = [...]`` ``rules = [...]``.
    The type's system prompt lists their names and descriptions; the model loads a body,
    reads a file or runs a script (in the sandbox) with the skill tools, under the policy."""

    skill_max_files: int = Field(256, ge=1)
    """Most files one skill folder may hold (SKILL.md included)."""

    skill_max_bytes: int = Field(4 * 1024 * 1024, ge=1)
    """Most bytes one skill folder may hold, all its files together."""

    memory_max_file_bytes: int = Field(64 * 1024, ge=1)
    """Largest memory file, in bytes (UTF-8): a write that would make a file bigger is
    refused, the reason told to the model."""

    memory_max_files: int = Field(200, ge=1)
    """Most files one memory namespace holds: a write that would add one more is refused."""

    memory_max_namespace_bytes: int = Field(1024 * 1024, ge=1)
    """Most bytes one memory namespace holds, all its files together: a write past it is
    refused."""

    memory_retention_s: float = Field(90 * 24 * 3600.0, gt=0)
    """How long a memory namespace is kept after its last write, in seconds (each write
    renews it); then Redis forgets it whole."""

    memory_namespace_retention_s: dict[str, float] = Field(default_factory=dict)
    """Retention of some namespaces, by name (``{"team-digest": 31536000}``), in place of
    ``memory_retention_s``; derived names too (``schedule:digest``)."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, config_file_source(settings_cls))

    @field_validator(
        "imports",
        "server_trusted_proxies",
        "sandbox_packages",
        "http_allowed_domains",
        "egress_allow",
        "web_search_allowed_domains",
        "web_search_blocked_domains",
        "web_fetch_allowed_domains",
        "web_fetch_blocked_domains",
        mode="before",
    )
    @classmethod
    def _split_lists(cls, value: object) -> object:
        # From the environment: "a.b,c.d", or a JSON list.
        if not isinstance(value, str):
            return value
        if value.lstrip().startswith("["):
            return json.loads(value)
        return [part.strip() for part in value.split(",") if part.strip()]

    @field_validator("server_trusted_proxies")
    @classmethod
    def _proxy_networks(cls, proxies: list[str]) -> list[str]:
        # Addresses only: a wildcard would let any client claim to be behind https.
        for proxy in proxies:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                raise ValueError(
                    f"server_trusted_proxies: {proxy!r} is not an IP address or network"
                ) from None
        return proxies

    @field_validator("sandbox_packages")
    @classmethod
    def _index_requirements(cls, packages: list[str]) -> list[str]:
        # Names and versions from the package index only: no URL, path or pip option.
        bad = [spec for spec in packages if not REQUIREMENT.fullmatch(spec.strip())]
        if bad:
            raise ValueError(
                f"not a package of the index (name, optional extras and versions): {bad[0]!r}"
            )
        return [spec.strip() for spec in packages]

    @field_validator("concurrency_limits")
    @classmethod
    def _positive_limits(cls, limits: dict[str, int]) -> dict[str, int]:
        bad = sorted(name for name, limit in limits.items() if limit < 1)
        if bad:
            raise ValueError(f"limits must be at least 1 (got {', '.join(bad)})")
        return limits

    @field_validator(
        "web_search_allowed_domains",
        "web_search_blocked_domains",
        "web_fetch_allowed_domains",
        "web_fetch_blocked_domains",
        "egress_allow",
    )
    @classmethod
    def _bare_domains(cls, domains: list[str]) -> list[str]:
        # The API takes ``example.com``, not a URL: a scheme would match nothing.
        with_scheme = [domain for domain in domains if "://" in domain]
        if with_scheme:
            raise ValueError(f"give domains without http(s):// (got {with_scheme[0]!r})")
        return domains

    @model_validator(mode="after")
    def _one_domain_list_per_web_tool(self) -> Settings:
        for tool in ("web_search", "web_fetch"):
            if getattr(self, f"{tool}_allowed_domains") and getattr(
                self, f"{tool}_blocked_domains"
            ):
                raise ValueError(
                    f"{tool}_allowed_domains and {tool}_blocked_domains cannot both be set "
                    "(the API takes one of them): keep one"
                )
        return self

    @field_validator("mcp_servers")
    @classmethod
    def _server_names(cls, servers: dict[str, McpServerSettings]) -> dict[str, McpServerSettings]:
        bad = sorted(name for name in servers if not re.fullmatch(MCP_SERVER_NAME_PATTERN, name))
        if bad:
            raise ValueError(
                f"MCP server names are 1-20 lowercase letters, digits or '-' (got {', '.join(bad)})"
            )
        return servers

    @model_validator(mode="after")
    def _known_mcp_servers(self) -> Settings:
        for agent, attached in self.agent_mcp.items():
            unknown = [name for name in attached.servers if name not in self.mcp_servers]
            if unknown:
                raise ValueError(
                    f"agent_mcp.{agent} names unknown MCP server(s) {', '.join(unknown)}: "
                    "declare them under mcp_servers"
                )
        return self

    @model_validator(mode="after")
    def _check_timing(self) -> Settings:
        if self.heartbeat_interval_s >= self.lease_s:
            raise ValueError(
                f"heartbeat_interval_s ({self.heartbeat_interval_s}) must be below lease_s "
                f"({self.lease_s}), or every lease expires before it is renewed"
            )
        return self

    @property
    def visibility_timeout_s(self) -> int:
        """Broker visibility timeout: far above any node's run time, so Redis never
        redelivers a live task (leases, not redelivery, detect dead workers)."""
        return int(2 * self.max_timeout_s)

    @property
    def workspace_root(self) -> Path:
        return self.workspace_dir or self.data_dir / "workspaces"

    @property
    def sandbox(self) -> SandboxSettings:
        """What the sandbox backends are built with and the code they run is limited to."""
        return SandboxSettings(
            backend=self.sandbox_backend,
            image=self.sandbox_image,
            uid=self.sandbox_uid,
            python=self.sandbox_python,
            warm_pool=self.sandbox_warm_pool,
            cgroup_parent=self.sandbox_cgroup_parent,
            packages=tuple(self.sandbox_packages),
            packages_dir=self.sandbox_packages_dir or self.data_dir / "sandbox-packages",
            install_timeout_s=self.sandbox_install_timeout_s,
            memory_fallback_tasks=self.sandbox_memory_fallback_tasks,
            wall_time_s=self.sandbox_wall_time_s,
            cpu_time_s=self.sandbox_cpu_time_s,
            memory_mb=self.sandbox_memory_mb,
            pids=self.sandbox_pids,
            open_files=self.sandbox_open_files,
            file_size_mb=self.sandbox_file_size_mb,
            scratch_mb=self.sandbox_scratch_mb,
            output_bytes=self.sandbox_output_bytes,
        )

    @property
    def llm(self) -> LLMSettings:
        """What the LLM client of a process is built with."""
        return LLMSettings(
            api_key=self.anthropic_api_key,
            base_url=self.anthropic_base_url,
            provider=self.llm_provider,
            region=self.llm_region,
            vertex_project_id=self.llm_vertex_project_id,
            connect_timeout_s=self.llm_connect_timeout_s,
            idle_timeout_s=self.llm_idle_timeout_s,
            min_tokens_per_s=self.llm_min_tokens_per_s,
            max_attempts=self.llm_max_attempts,
            retry_after_cap_s=self.llm_retry_after_cap_s,
            retry_backoff_s=self.llm_retry_backoff_s,
            model_prices=dict(self.model_prices),
            rate_limits=dict(self.llm_rate_limits),
            rate_window_s=self.llm_rate_window_s,
            rate_max_wait_s=self.llm_rate_max_wait_s,
            cache_enabled=self.llm_cache_enabled,
            cache_ttl_s=self.llm_cache_ttl_s,
            prompt_cache_ttl=self.llm_prompt_cache_ttl,
            max_tokens_cap=self.llm_max_tokens_cap,
            refusal_fallback_model=self.llm_refusal_fallback_model,
            model_lifecycle_date=self.model_lifecycle_date,
            web_search_usd_per_1k=self.web_search_usd_per_1k,
            batch_types=tuple(self.llm_batch_types),
            batch_poll_s=self.llm_batch_poll_s,
            batch_max_wait_s=self.llm_batch_max_wait_s,
        )

    @property
    def http_tool(self) -> HttpToolSettings:
        """What the http_get tool may fetch, and how much."""
        return HttpToolSettings(
            allowed_domains=tuple(self.http_allowed_domains),
            max_bytes=self.http_max_bytes,
            timeout_s=self.http_timeout_s,
        )

    @property
    def web_tools(self) -> WebToolsSettings:
        """Which server-side web tools agents are offered, and their limits."""
        return WebToolsSettings(
            search=WebToolSettings(
                max_uses=self.web_search_max_uses,
                allowed_domains=tuple(self.web_search_allowed_domains),
                blocked_domains=tuple(self.web_search_blocked_domains),
            )
            if self.web_search
            else None,
            fetch=WebToolSettings(
                max_uses=self.web_fetch_max_uses,
                allowed_domains=tuple(self.web_fetch_allowed_domains),
                blocked_domains=tuple(self.web_fetch_blocked_domains),
                max_content_tokens=self.web_fetch_max_content_tokens,
            )
            if self.web_fetch
            else None,
        )

    @property
    def planner_bounds(self) -> PlannerBounds:
        """What a plan written by the planner model may set."""
        return PlannerBounds(
            allow_approvals=self.planner_allow_approvals,
            allow_python=self.planner_allow_python,
            max_attempts=self.planner_max_attempts,
            max_timeout_s=self.planner_max_timeout_s,
            max_retry_delay_s=self.planner_max_retry_delay_s,
            max_sleep_s=self.planner_max_sleep_s,
        )

    @property
    def redis_access(self) -> RedisAccess:
        """How to reach the state store and the broker beyond their URLs: credentials and
        TLS (``dagwright.redis_endpoint``)."""
        return RedisAccess(
            username=self.redis_username,
            password=self.redis_password,
            tls_ca_file=self.redis_tls_ca_file,
            tls_cert_file=self.redis_tls_cert_file,
            tls_key_file=self.redis_tls_key_file,
            tls_cert_reqs=self.redis_tls_cert_reqs,
            tls_check_hostname=self.redis_tls_check_hostname,
            sentinel_password=self.redis_sentinel_password,
        )

    @property
    def effective_broker_url(self) -> str | None:
        """The broker URL, defaulting to the state store."""
        return self.broker_url or self.redis_url


# -- views: one group of settings each, for the code that needs only that group ---------
# No defaults here: Settings holds them, and builds every view.


@dataclass(frozen=True)
class RedisAccess:
    """The ``redis_username`` / ``redis_password``, ``redis_tls_*`` and
    ``redis_sentinel_password`` settings: what every Redis connection needs beyond its URL."""

    username: str | None
    password: SecretStr | None
    tls_ca_file: Path | None
    tls_cert_file: Path | None
    tls_key_file: Path | None
    tls_cert_reqs: Literal["required", "optional", "none"]
    tls_check_hostname: bool
    sentinel_password: SecretStr | None


@dataclass(frozen=True)
class SandboxSettings:
    """The ``sandbox_*`` settings: which backend, built how, and the default limits of
    the code it runs."""

    backend: str
    image: str
    uid: int
    python: str
    warm_pool: int
    cgroup_parent: Path | None
    packages: tuple[str, ...]
    packages_dir: Path  # sandbox_packages_dir, its default resolved
    install_timeout_s: float
    memory_fallback_tasks: int
    wall_time_s: float
    cpu_time_s: float
    memory_mb: int
    pids: int
    open_files: int
    file_size_mb: int
    scratch_mb: int
    output_bytes: int


@dataclass(frozen=True)
class LLMSettings:
    """The ``anthropic_*`` and ``llm_*`` settings and the price list: the LLM client,
    its retries, its shared rate limits and cache."""

    api_key: SecretStr | None
    base_url: str | None
    provider: str
    region: str | None
    vertex_project_id: str | None
    connect_timeout_s: float
    idle_timeout_s: float
    min_tokens_per_s: float
    max_attempts: int
    retry_after_cap_s: float
    retry_backoff_s: float
    model_prices: dict[str, ModelPrice]
    rate_limits: dict[str, LLMRateLimit]
    rate_window_s: float
    rate_max_wait_s: float
    cache_enabled: bool
    cache_ttl_s: int
    prompt_cache_ttl: Literal["5m", "1h", "off"]
    max_tokens_cap: int
    refusal_fallback_model: str | None
    web_search_usd_per_1k: float
    batch_types: tuple[str, ...]
    batch_poll_s: float
    batch_max_wait_s: float
    model_lifecycle_date: dt.date | None = None


@dataclass(frozen=True)
class HttpToolSettings:
    """The ``http_*`` settings of the http_get tool."""

    allowed_domains: tuple[str, ...]
    max_bytes: int
    timeout_s: float


@dataclass(frozen=True)
class WebToolSettings:
    """One server-side web tool (``web_search_*`` or ``web_fetch_*`` settings)."""

    max_uses: int
    allowed_domains: tuple[str, ...]
    blocked_domains: tuple[str, ...]
    max_content_tokens: int | None = None  # web fetch only


@dataclass(frozen=True)
class WebToolsSettings:
    """The server-side web tools this deployment offers: None where turned off."""

    search: WebToolSettings | None
    fetch: WebToolSettings | None


@dataclass(frozen=True)
class PlannerBounds:
    """The ``planner_allow_*`` and ``planner_max_*`` limits on the knobs of a planned
    plan (the model's, not a file's or a caller's): checked as plan problems, which go
    back to the planner to fix (``planning/bounds.py``)."""

    allow_approvals: bool
    allow_python: bool
    max_attempts: int
    max_timeout_s: float
    max_retry_delay_s: float
    max_sleep_s: float


class CheckedTomlSource(TomlConfigSettingsSource):
    """The TOML source, with a file that does not parse refused in one line that names it
    (pydantic-settings lets tomllib's error through, which reads as a crash)."""

    def _read_file(self, file_path: Path | Traversable) -> dict[str, Any]:
        try:
            return super()._read_file(file_path)
        except ValueError as exc:  # tomllib.TOMLDecodeError
            raise ConfigurationError(
                f"{file_path} is not valid TOML ({exc}): fix it, or point "
                "DAGWRIGHT_CONFIG_FILE at another file"
            ) from exc
        except OSError as exc:
            raise ConfigurationError(f"cannot read {file_path}: {exc}") from exc


def config_file_source(settings_cls: type[BaseSettings]) -> CheckedTomlSource:
    """``DAGWRIGHT_CONFIG_FILE``, which must exist when it is set (``/dev/null`` for no
    file); else ``./dagwright.toml`` if there is one. A file named on purpose and missing
    is a typo, not "no settings"."""
    named = os.environ.get("DAGWRIGHT_CONFIG_FILE")
    if named and (not Path(named).exists() or Path(named).is_dir()):  # /dev/null: none
        raise ConfigurationError(
            f"DAGWRIGHT_CONFIG_FILE names {named}, which is not a file: fix the path, or "
            "unset it to read ./dagwright.toml"
        )
    return CheckedTomlSource(settings_cls, named or "dagwright.toml")
