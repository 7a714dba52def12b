"""Frozen pydantic models: what crosses a process boundary, always as JSON.

``Plan`` and ``Node`` are what a plan file holds, what the Python builder produces and
(later) what the planner LLM emits. ``RunState`` / ``NodeState`` are read-only snapshots
of a run; ``Event`` is one entry of a run's event stream.

Every model is ``defer_build=True``: pydantic builds its validator on the first
validation, not at import. ``import dagwright`` and every ``dagwright`` command import
this module, and most use a few of its models or none (building all at import cost
~40 ms, a tenth of ``dagwright --help``).

What a plan holds is input from outside (a file, a caller, a model's output), so its
models refuse non-finite numbers (``allow_inf_nan=False``: an ``inf`` backoff would be
stored as ``null``) and bound every duration and the nesting of ``params``. Limits that
depend on settings (sizes, node counts, ``max_timeout_s``) are the validator's
(``plans/validation.py``).
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dagwright.json_shapes import json_shape

NODE_ID_PATTERN = r"^[a-z0-9_-]{1,64}$"
MAP_CHILD_ID_PATTERN = r"^[a-z0-9_-]{1,64}\[[0-9]{1,6}\]$"
"""The id of a mapped node's child, ``<id>[<index>]``: dagwright's, never a plan's."""
NodeId = Annotated[str, Field(max_length=64)]

MAX_DURATION_S = 30 * 24 * 3600.0
"""Longest time any duration of a plan may ask for (a timeout, an approval's wait): past a
month a number is a mistake, and every ms value in Redis stays an exact integer."""
MAX_BACKOFF_S = 24 * 3600.0
"""Longest delay between two attempts of a node."""
MAX_PARAMS_DEPTH = 32
"""Levels of nesting of a node's ``params``: enough for any real arguments, and far from
the recursion limits of the JSON code that reads them."""

MIN_PRIORITY = 1
MAX_PRIORITY = 5
DEFAULT_PRIORITY = 3
"""Run and node priorities: a small range, higher first
(``docs/internals/priorities-and-fairness.md``): RabbitMQ's order; kombu's Redis transport,
where 0 comes first, is given ``AGED_PRIORITY - priority`` (``app.broker_priority``)."""
AGED_PRIORITY = MAX_PRIORITY + 1
"""Above every priority a plan may ask for: a node that waited past
``priority_aging_s`` is published again at it, so no priority waits forever."""
Priority = Annotated[int, Field(ge=MIN_PRIORITY, le=MAX_PRIORITY)]

RunIf = Literal["all_succeeded", "all_done", "any_failed", "none_failed", "one_success", "always"]
"""A node's trigger rule: when it runs, from how its dependencies ended (see ``Node.run_if``)."""
DEFAULT_RUN_IF: RunIf = "all_succeeded"
BLOCKED_BY_A_FAILURE: frozenset[RunIf] = frozenset({"all_succeeded", "none_failed"})
"""The rules under which a failed dependency blocks the node at once (a re-plan of the
failure replaces such a node with its branch; the other handlers run for the failure)."""

# The plan models: what a plan file, the builder, a caller or the planner gives. Their
# fields' docstrings are their JSON Schema's descriptions: the planner model reads the
# schema as its manual of the plan language, and generated API clients read it too.
PLAN_MODEL_CONFIG = ConfigDict(
    defer_build=True,
    frozen=True,
    extra="forbid",
    allow_inf_nan=False,
    use_attribute_docstrings=True,
)


class RetryPolicy(BaseModel):
    """How a node is retried after a retryable failure (backoff is exponential with jitter)."""

    model_config = PLAN_MODEL_CONFIG

    max_attempts: int = Field(3, ge=1, le=100)
    """Attempts in all, the first included."""
    backoff_s: float = Field(1.0, ge=0, le=MAX_BACKOFF_S)
    """Delay before the first retry; doubles on each retry."""
    backoff_max_s: float = Field(60.0, ge=0, le=MAX_BACKOFF_S)
    """Ceiling on any one delay."""
    jitter: bool = True
    """Randomise each delay ("equal jitter": half fixed, half random) so retries of many
    nodes do not arrive together."""
    non_retryable: list[str] = Field(default_factory=list)
    """Exception class names that fail the node at once even if otherwise retryable."""


class Budget(BaseModel):
    """Most that the LLM calls of a run (or of one node) may spend; each limit optional.

    Enforced before every LLM call: a call whose worst case (its estimated input plus
    ``max_tokens`` of output, at the model's price) would pass a limit is not made.
    Token limits count tokens as they are billed (``Usage.billed_input_tokens``): a
    fresh input or output token counts 1, a prompt-cache read counts its price over the
    input price (0.1 by default, 0.05 on Sonnet 5.5), a cache write 1.25 (5-minute) or 2
    (1-hour); so a conversation re-read from the cache costs its budget a tenth of a
    fresh one. The worst case of the next call counts its whole input as fresh.
    """

    model_config = PLAN_MODEL_CONFIG

    max_input_tokens: int | None = Field(None, ge=1)
    """Input tokens of all the calls together, as billed (cache reads and writes weighted
    by their price)."""
    max_output_tokens: int | None = Field(None, ge=1)
    """Output tokens of all the calls together."""
    max_total_tokens: int | None = Field(None, ge=1)
    """Input (as billed) and output tokens together (``budget_tokens``)."""
    max_cost_usd: float | None = Field(None, gt=0)
    """Cost in USD, priced from ``settings.llm.model_prices``. A run submitted with one must
    use priced models only: it is refused otherwise."""

    @property
    def is_set(self) -> bool:
        return any(value is not None for value in self.model_dump().values())

    def overridden_by(self, other: Budget | None) -> Budget:
        """This budget with every limit ``other`` sets taken from ``other``."""
        if other is None:
            return self
        return self.model_copy(update=other.model_dump(exclude_none=True))


class ConcurrencyKey(BaseModel):
    """A per-key concurrency limit: the runs (a plan's) or the nodes (a node's) whose
    ``key`` renders the same share ``limit`` places (orchestrator/control/run_gates.py,
    orchestrator/execution/limits.py)."""

    model_config = PLAN_MODEL_CONFIG

    key: str = Field(min_length=1, max_length=200)
    """A template over the run's inputs, ``{{ inputs.customer }}``, or a fixed text."""
    limit: int = Field(ge=1, le=10_000)
    """Most runs of one key running at once; the others wait in the order submitted."""


MAP_PATH_PATTERN = r"^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){0,15}$"


class MapOver(BaseModel):
    """Dynamic fan-out: the node runs once per item of a list an upstream node returned,
    as children ``<id>[0]``, ``<id>[1]``..., each a node of its own (retries, timeout,
    limits, dead letter, replay); the node's output is the list of their outputs, in the
    items' order. See docs/client-guide.md (Dynamic fan-out)."""

    model_config = PLAN_MODEL_CONFIG

    over: NodeId
    """The upstream node whose output holds the list (one of ``depends_on``)."""
    path: str | None = Field(None, pattern=MAP_PATH_PATTERN)
    """Keys leading to the list inside that output, dotted (``companies``,
    ``result.items``); unset: the output is the list."""
    max_items: int | None = Field(None, ge=0)
    """Most items mapped; unset: ``settings.limits.map_max_items``, which also caps it. A longer
    list fails the node, unless ``truncate`` is set."""
    truncate: bool = False
    """Map the first ``max_items`` items of a longer list instead of failing."""
    index: int | None = Field(None, ge=0)
    """Set by dagwright on each child: the index of its item. Not written in plans."""
    item: Any = None
    """Set by dagwright on each child: its item (so a child's claim does not carry the
    whole list). Not written in plans."""


class Node(BaseModel):
    """One subtask of a plan."""

    model_config = PLAN_MODEL_CONFIG

    id: str = Field(pattern=f"{NODE_ID_PATTERN}|{MAP_CHILD_ID_PATTERN}")
    """Unique in the plan: lowercase letters, digits, ``_`` and ``-``."""
    type: str = Field(min_length=1, max_length=64)
    """A registered worker type: ``function``, ``python``, ``researcher``..."""
    depends_on: list[NodeId] = Field(default_factory=list)
    """Ids of the nodes whose outputs this node needs; it runs after all of them succeed
    (unless ``run_if`` says otherwise)."""
    run_if: RunIf = DEFAULT_RUN_IF
    """When the node runs, once its dependencies have ended: ``all_succeeded`` (every one
    succeeded; a failed one blocks it, a skipped one skips it), ``all_done`` (whatever
    their outcome), ``any_failed`` (at least one failed or was blocked by a failure;
    else it is skipped), ``none_failed`` (none failed: each succeeded or was skipped; a
    failed one blocks it), ``one_success`` (runs as soon as one succeeded, without
    waiting for the others; if none did, it is blocked after a failure, else skipped),
    ``always`` (a teardown: as ``all_done``, and it also runs after a cancel or a run
    timeout, which leave the run open for it up to ``teardown_timeout_s``).
    A node with another rule than ``all_succeeded`` is a handler:
    it receives each dependency as an outcome ``{"status", "output" | "error"}``, and it
    is not among the run's default outputs. See docs/client-guide.md (Trigger rules)."""
    function: str | None = Field(None, max_length=200)
    """``function`` nodes: the name of a registered function."""
    task: str | None = Field(None, min_length=1, max_length=200)
    """``celery_task`` nodes: the name of a task of the team's own Celery app
    (``DAGWRIGHT_CELERY_APP``), sent through that app to the team's workers with
    ``params`` as its keyword arguments (docs/extending.md, "Tasks on your own Celery
    workers")."""
    params: dict[str, Any] = Field(default_factory=dict)
    """JSON arguments given to the worker (a function's keyword arguments)."""
    code: str | None = None
    """``python`` nodes: the program to run in the sandbox."""
    instruction: str | None = None
    """LLM agent nodes: what the agent must do, self-contained: the agent sees this, the
    run's goal and context, and the outputs of its ``depends_on`` nodes, nothing else
    of the plan."""
    retry: RetryPolicy | None = None
    """Retry policy; unset means the worker type's default."""
    timeout_s: float | None = Field(None, gt=0, le=MAX_DURATION_S)
    """Execution time limit; unset means ``settings.limits.default_timeout_s``."""
    priority: Priority | None = None
    """1 to 5, higher first: this node's place among the nodes waiting for a worker,
    instead of its run's priority (default 3). A long wait lifts it to the top
    (``priority_aging_s``), so a low priority is late, never starved."""
    approval: Literal["required"] | None = None
    """``required``: a person approves the node (``dagwright approve``) before it runs."""
    approval_timeout_s: float | None = Field(None, gt=0, le=MAX_DURATION_S)
    """How long an approval of this node may wait before it counts as rejected; unset
    means ``settings.limits.approval_timeout_s``."""
    concurrency: ConcurrencyKey | None = None
    """At most ``limit`` nodes with the same ``key`` running at once, over every run and
    worker (``{key: "sync-{{ inputs.customer }}", limit: 1}``: one sync per customer);
    the key is rendered from the run's inputs. Over it, the node waits for a slot."""
    countdown_s: float | None = Field(None, gt=0, le=MAX_DURATION_S)
    """Once ready (its dependencies done, as its ``run_if`` says), how long the node waits
    before it is queued (Celery's ``countdown``): RETRY_WAIT meanwhile, "waiting until
    ...". A root node counts from the run's start. Unset: it is queued at once."""
    budget: Budget | None = None
    """LLM agent nodes: most this node's LLM calls may spend; unset limits fall back to
    the worker type's (its ``token_budget`` for total tokens)."""
    output_schema: dict[str, Any] | None = None
    """LLM agent nodes: a JSON Schema (``type: object``) the answer must match. The
    agent gives it through a result tool of that schema; an answer that does not match
    is sent back with what is wrong, a bounded number of times (the type's
    ``max_tool_errors``), then the node fails. The output is the JSON object."""
    model: str | None = Field(None, min_length=1, max_length=200)
    """LLM agent nodes: the model of this node's calls instead of its type's."""
    max_tokens: int | None = Field(None, ge=1)
    """LLM agent nodes: ``max_tokens`` of each call instead of its type's (at most the
    model's output limit)."""
    tools: list[str] | None = None
    """LLM agent nodes: only these of its type's tools (``[]``: none)."""
    skills: list[str] | None = None
    """LLM agent nodes: only these of its type's skills (``[]``: none); never one the
    type is not given."""
    map: MapOver | None = None
    """Run once per item of an upstream's list (dynamic fan-out, see ``MapOver``): each
    child sees its item as that upstream's output, and ``{{ item }}``,
    ``{{ item.<key> }}`` and ``{{ index }}`` in ``params`` are its values."""

    @field_validator("depends_on")
    @classmethod
    def _no_duplicate_deps(cls, deps: list[str]) -> list[str]:
        if len(set(deps)) != len(deps):
            raise ValueError("lists a dependency twice")
        return deps

    @field_validator("params", "output_schema")
    @classmethod
    def _params_are_json(cls, params: dict[str, Any] | None) -> dict[str, Any] | None:
        if params is None:
            return None
        depth = json_shape(params).depth
        if depth > MAX_PARAMS_DEPTH:
            raise ValueError(f"nested {depth} levels deep; the limit is {MAX_PARAMS_DEPTH}")
        return params


WebhookEvent = Literal["succeeded", "failed", "cancelled"]
WEBHOOK_EVENTS: tuple[WebhookEvent, ...] = ("succeeded", "failed", "cancelled")
"""The run-final events a webhook can be told of (``run.<status>``)."""
MAX_WEBHOOKS = 20  # of a run, all told (its plan's and its submit's): forget.lua loops on them
# A webhook's own signing key: a variable of this family only, so that whoever may submit
# cannot have the workers sign with (and so reveal HMACs of) any other of their secrets.
WEBHOOK_SECRET_ENV_PATTERN = r"^DAGWRIGHT_WEBHOOK_SECRET_[A-Z0-9_]{1,100}$"


class Webhook(BaseModel):
    """An HTTP endpoint told when a run ends (``dagwright/webhooks/``): a signed JSON POST,
    delivered at least once by the reconciler. Only ``http`` and ``https`` URLs, without a
    user name or password, to destinations the egress filter allows (``dagwright/egress/``:
    checked when the run is submitted and again, after resolution, when sending)."""

    model_config = PLAN_MODEL_CONFIG

    url: str = Field(min_length=8, max_length=2000, pattern=r"^https?://[^\s]+$")
    """Where the POST goes (``http://`` or ``https://``)."""
    on: list[WebhookEvent] = Field(default_factory=lambda: list(WEBHOOK_EVENTS), min_length=1)
    """Which run ends to send (default: all of ``succeeded``, ``failed``, ``cancelled``)."""
    secret_env: str | None = Field(None, pattern=WEBHOOK_SECRET_ENV_PATTERN)
    """Name of the environment variable, on the processes that send (the workers running
    the reconciler), holding the signing secret: ``DAGWRIGHT_WEBHOOK_SECRET_<NAME>``;
    unset: ``DAGWRIGHT_WEBHOOK_SECRET``. The secret itself is never stored nor sent."""


class Plan(BaseModel):
    """A dependency DAG of nodes, and which of them hold the run's result."""

    model_config = PLAN_MODEL_CONFIG

    goal: str = ""
    """Free text, for people (and the planner)."""
    output: NodeId | list[NodeId] | None = None
    """Node id(s) whose output is the run's result; unset means the plan's sink nodes."""
    nodes: list[Node] = Field(min_length=1)
    """The subtasks; order does not matter."""
    budget: Budget | None = None
    """Most the whole run's LLM calls may spend (a submit's budget overrides it limit by
    limit)."""
    timeout_s: float | None = Field(None, gt=0, le=MAX_DURATION_S)
    """Wall-clock limit of the whole run, from its submission: past it, the run's open
    nodes are cancelled and the run fails ("timed out after ..."). Unset: none. A
    ``timeout_s`` given at submit wins; a planner's plan cannot set it."""
    priority: Priority | None = None
    """1 to 5, higher first (unset: 3): where the run's nodes stand among the nodes
    waiting for a worker; a node's own ``priority`` wins. A ``priority`` given at submit
    wins; a planner's plan cannot set it."""
    response_cache: bool = False
    """Answer the run's agent calls (planner included) from the cross-run response cache
    when the very same request was answered before, at 0 tokens (``llm/response_cache.py``). A
    ``response_cache`` given at submit wins; a planner's plan cannot set it."""
    memory: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9_.-]{0,62}$")
    """The memory namespace of the run's agents that are offered the memory tool (e.g.
    ``team-digest``: runs naming it share their memory). Unset: their type's, else the
    schedule's for a scheduled run, else the run's own (docs/memory.md). A ``memory``
    given at submit wins; a planner's plan cannot set it."""
    inputs: dict[str, Any] | None = None
    """The run's arguments, as a JSON Schema (Draft 2020-12) of an object: ``type:
    object``, ``properties`` with their types and ``default``s, ``required``. A run gives
    them at submit (``inputs={...}``, ``--input k=v``, a schedule's); they are checked
    before anything is written (an input not listed is refused unless the schema sets
    ``additionalProperties``), and ``{{ inputs.<name> }}`` in params and instructions is
    replaced by the value (``plans/input_templates.py``). Unset: the plan takes none."""

    @field_validator("inputs")
    @classmethod
    def _inputs_are_json(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is not None and json_shape(schema).depth > MAX_PARAMS_DEPTH:
            raise ValueError(f"nested too deep; the limit is {MAX_PARAMS_DEPTH} levels")
        return schema

    webhooks: list[Webhook] = Field(default_factory=list, max_length=MAX_WEBHOOKS)
    """Endpoints told when a run of this plan ends (with the submit's own)."""
    concurrency: ConcurrencyKey | None = None
    """At most ``limit`` runs of the same key at once, the key rendered from the run's
    inputs (``{key: "{{ inputs.customer }}", limit: 2}``): a run over the limit is
    accepted and waits to start, "waiting for concurrency key customer=acme"."""

    def output_nodes(self) -> list[str]:
        """The nodes whose outputs make the result: ``output``, or else every sink of the
        plan's main path (handlers, the nodes with a ``run_if`` rule, and every node
        downstream of one are left out: they run on the side, often not at all)."""
        if isinstance(self.output, str):
            return [self.output]
        if self.output:
            return list(self.output)
        main = self.main_path()
        depended_on = {dep for node in self.nodes if node.id in main for dep in node.depends_on}
        return [node.id for node in self.nodes if node.id in main and node.id not in depended_on]

    def main_path(self) -> set[str]:
        """Ids of the nodes that are neither a handler nor downstream of one."""
        dependents: dict[str, list[str]] = {}
        for node in self.nodes:
            for dep in node.depends_on:
                dependents.setdefault(dep, []).append(node.id)
        side = [node.id for node in self.nodes if node.run_if != DEFAULT_RUN_IF]
        seen = set(side)
        while side:  # a walk, not recursion: a 10,000-long chain must not hit the limit
            for child in dependents.get(side.pop(), []):
                if child not in seen:
                    seen.add(child)
                    side.append(child)
        return {node.id for node in self.nodes if node.id not in seen}


class RunStatus(enum.StrEnum):
    PLANNING = "planning"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        return self in {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED}


class NodeStatus(enum.StrEnum):
    PENDING = "pending"
    QUEUED = "queued"
    RUNNING = "running"
    RETRY_WAIT = "retry_wait"
    WAITING_APPROVAL = "waiting_approval"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    BLOCKED = "blocked"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    """Its ``run_if`` can no longer be met (an ``any_failed`` handler whose dependencies
    all succeeded, a ``one_success`` one whose dependencies were all skipped, or a node
    after a skipped one): it never runs. Not a failure."""
    REPLACED = "replaced"
    """Failed (or blocked by a failure) and replaced by a re-plan: not a failure of the run."""

    @property
    def is_final(self) -> bool:
        return self in FINAL_NODE_STATUSES


FINAL_NODE_STATUSES = frozenset(
    {
        NodeStatus.SUCCEEDED,
        NodeStatus.FAILED,
        NodeStatus.BLOCKED,
        NodeStatus.CANCELLED,
        NodeStatus.SKIPPED,
        NodeStatus.REPLACED,
    }
)


def usd(amount: float) -> str:
    """``$0.04``, ``$0.000125``: cents at least, and as many digits (up to six) as it takes."""
    whole, _, decimals = f"{amount:.6f}".rstrip("0").partition(".")
    return f"${whole}.{decimals.ljust(2, '0')}"


class Usage(BaseModel):
    """Tokens and cost of LLM calls: of one call, of a node, or of a run."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_creation_1h_input_tokens: int = 0
    """Of ``cache_creation_input_tokens``, those written for an hour (priced higher)."""
    cost_usd: float = 0.0
    """Cost of the priced calls; with ``unpriced_tokens``, a lower bound."""
    llm_calls: int = 0
    unpriced_tokens: int = 0
    """Tokens of calls to models missing from the price table: their cost is unknown,
    never 0 (see ``cost_is_known``)."""
    web_search_requests: int = 0
    """Searches the API's server-side web search made (billed per 1,000, in ``cost_usd``)."""
    web_fetch_requests: int = 0
    """Pages the API's server-side web fetch read (their content is billed as input)."""
    cache_discount_tokens: int = 0
    """How many fewer input tokens were billed than read, in fresh-input tokens: a cache
    read billed at a tenth of an input token saves nine tenths of one, a write billed at
    1.25x costs a quarter more (negative). Set when the call is priced
    (``llm/pricing.py``); ``billed_input_tokens`` is what budgets count."""

    def plus(self, other: Usage) -> Usage:
        return Usage(
            **{name: getattr(self, name) + getattr(other, name) for name in Usage.model_fields}
        )

    @property
    def cost_is_known(self) -> bool:
        return self.unpriced_tokens == 0

    @property
    def known_cost_usd(self) -> float | None:
        """The cost in USD; None (unknown, not 0) if a model had no price."""
        return self.cost_usd if self.cost_is_known else None

    def cost_words(self, amount: str | None = None) -> str:
        """The cost for people: ``$0.0123``; ``unknown`` if nothing of it was priced;
        ``≥ $0.0123 + unpriced`` if part was. ``amount``: the priced part, formatted by the
        caller (default ``usd``)."""
        shown = usd(self.cost_usd) if amount is None else amount
        if self.cost_is_known:
            return shown
        if self.cost_usd == 0:
            return "unknown"
        return f"≥ {shown} + unpriced"

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_input_tokens
            + self.cache_creation_input_tokens
        )

    @property
    def read_input_tokens(self) -> int:
        """Every input token the model read: fresh, cache reads and cache writes."""
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens

    @property
    def billed_input_tokens(self) -> int:
        """The input as billed, in fresh-input tokens: cache reads and writes weighted by
        their price (what token budgets count, so a cached re-read is not a fresh one)."""
        return self.read_input_tokens - self.cache_discount_tokens

    @property
    def billed_total_tokens(self) -> int:
        """``billed_input_tokens`` plus the output tokens."""
        return self.billed_input_tokens + self.output_tokens


class ErrorInfo(BaseModel):
    """Why a node failed (its last failure, if it was retried)."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    error_class: str
    message: str
    retryable: bool
    traceback: str | None = None


class NodeWait(BaseModel):
    """What a parked node waits on, so that every view can say why it is not running."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    on: Literal[
        "breaker",
        "slot",
        "batch",
        "celery_task",
        "worker",
        "queue",
        "delay",
        "concurrency",
        "rate",
        "lost",
    ]
    """The kind of wait: an open circuit breaker (the node is ``retry_wait``), a free slot
    of a concurrency limit (the node is ``queued``; it is woken when a slot frees), the
    Message Batch its LLM call was sent in (``retry_wait``, polled again at ``until``),
    the Celery task a ``celery_task`` node sent to the team's workers (``retry_wait``,
    woken when its result is in, checked again at ``until`` at the latest), or
    a worker: none is alive at all (``worker``), or none consumes the node's queue
    (``queue``); these two are found when the run is read, never stored
    (orchestrator/control/worker_waits.py). Flow control (``retry_wait``, due at
    ``until`` or, for a key, when a place frees): a delayed start (``delay``: the run's
    ``not_before``, a node's ``countdown_s``), the run's concurrency key
    (``concurrency``), a rate limit (``rate``). Re-delivery after its worker was lost
    (``lost``: its lease expired, the worker died whole or hung; ``retry_wait``, due at
    ``until``, ``count`` losses so far)."""
    name: str
    """What it waits on, e.g. the breaker ``model:claude-sonnet-5-5``, the limit
    ``type:researcher``, a Celery task id or, waiting for a worker, the node's queue
    ``dw.coder``."""
    since: datetime
    """When this node began waiting on it (through one open period after another)."""
    until: datetime | None = None
    """When the node is due to try again (a breaker wait); None: when a slot frees."""
    last_failure: str = ""
    """The failure that last counted against the dependency (``"<class>: <message>"``)."""
    worker_type: str = ""
    """Waiting for a worker of a queue: what ``dagwright worker --type`` calls that worker
    (``coder``, ``function:gpu``, ``orchestrator``)."""
    limit: str = ""
    """Flow control: the limit waited for, ``2`` runs of a key or ``5/s`` of a rate."""
    held: int = 0
    """A concurrency key: how many of its runs were running when last looked at."""
    count: int = 0
    """A lost worker: how many workers the node lost since its last recorded outcome."""

    def describe(self, now: datetime | None = None) -> str:
        """One line: ``waiting on breaker model:x, open 25 s more: last error ...``,
        ``waiting for a slot of type:researcher (full for 12 s)``, ``waiting on batch
        msgbatch_x for 300 s, polled again in 25 s``, ``waiting for Celery task <id> on the
        team's workers for 40 s, checked again in 260 s at the latest`` or ``waiting for a
        worker: no live worker consumes dw.coder (start one: dagwright worker --type coder)
        (queued 40 s)``."""
        now = now or datetime.now(UTC)
        waited_s = max((now - self.since).total_seconds(), 0.0)
        if self.on in ("worker", "queue"):
            return f"{self.worker_hint()} (queued {waited_s:.0f} s)"
        if self.on in ("delay", "concurrency", "rate"):
            return self.flow_control_hint()
        if self.on == "lost":
            return self.lost_worker_hint(now)
        if self.until is None:
            return f"waiting for a slot of {self.name} (full for {waited_s:.0f} s)"
        left_s = max((self.until - now).total_seconds(), 0.0)
        if self.on == "batch":
            return (
                f"waiting on batch {self.name} for {waited_s:.0f} s, polled again in {left_s:.0f} s"
            )
        if self.on == "celery_task":
            return (
                f"waiting for Celery task {self.name} on the team's workers for "
                f"{waited_s:.0f} s, checked again in {left_s:.0f} s at the latest"
            )
        cause = f": last error {self.last_failure}" if self.last_failure else ""
        return f"waiting on {self.on} {self.name}, open {left_s:.0f} s more{cause}"

    def flow_control_hint(self) -> str:
        """``waiting until 2026-11-29 05:00:00 UTC``, ``waiting for concurrency key
        customer=acme: 2 of 2 runs running`` or ``waiting for rate limit
        function:fetch_prices (5/s) until 05:00:01 UTC``."""
        until = f"{self.until:%Y-%m-%d %H:%M:%S} UTC" if self.until else ""
        if self.on == "delay":
            return f"waiting until {until}"
        if self.on == "concurrency":
            return (
                f"waiting for concurrency key {self.name}: {self.held} of {self.limit} runs running"
            )
        return f"waiting for rate limit {self.name} until {until}"

    def lost_worker_hint(self, now: datetime) -> str:
        """``waiting for re-delivery after its worker was lost (2 times, last
        host:4242 at 10:31:02 UTC), again in 4 s``."""
        times = "once" if self.count == 1 else f"{self.count} times"
        holder = f" {self.name}" if self.name else ""
        left_s = max((self.until - now).total_seconds(), 0.0) if self.until else 0.0
        return (
            f"waiting for re-delivery after its worker was lost ({times}, last{holder} at "
            f"{self.since:%H:%M:%S} UTC), again in {left_s:.0f} s"
        )

    def worker_hint(self) -> str:
        """What a node waiting for a worker needs, and the command that starts one."""
        if self.on == "worker":
            return "waiting for a worker: no live worker (start dagwright up, or dagwright worker)"
        return (
            f"waiting for a worker: no live worker consumes {self.name} "
            f"(start one: dagwright worker --type {self.worker_type})"
        )


class NodeState(BaseModel):
    """A snapshot of one node of a run."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    status: NodeStatus
    type: str
    depends_on: list[str] = Field(default_factory=list)
    attempts: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    output: Any = None
    error: ErrorInfo | None = None
    usage: Usage = Field(default_factory=Usage)
    waiting: NodeWait | None = None
    """What the node waits on while it is parked (RETRY_WAIT, or QUEUED for a slot), or
    while it is QUEUED and no live worker consumes its queue (None otherwise)."""


class RunCounts(BaseModel):
    """How many nodes are in which situation."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    total: int = 0
    done: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    blocked: int = 0
    cancelled: int = 0
    skipped: int = 0
    replaced: int = 0
    waiting_approval: int = 0


class RunState(BaseModel):
    """A snapshot of a run: its status, every node, and the result once it succeeded."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    run_id: str
    status: RunStatus
    goal: str = ""
    created_at: datetime
    finished_at: datetime | None = None
    counts: RunCounts
    output_nodes: list[str]
    nodes: dict[str, NodeState]
    result: Any = None
    usage: Usage = Field(default_factory=Usage)
    budget: Budget | None = None
    reason: str | None = None
    """Why the run was stopped: the cancel's reason, or "timed out after ...", or why the
    reconciler failed it ("open longer than its maximum age ...": run_max_age_s)."""
    tearing_down: RunStatus | None = None
    """Set while a stopped run (``reason``) is kept open for its teardown nodes (``run_if:
    always``): the status it ends as once they are done (``cancelled``, or ``failed``
    after its run timeout)."""
    response_cache: bool = False
    """The run's agents use the cross-run response cache (asked at submit or by its plan)."""
    inputs: dict[str, Any] = Field(default_factory=dict)
    """The run's inputs as its nodes read them: as given, with the plan's defaults."""

    def failed_nodes(self) -> dict[str, NodeState]:
        return {nid: n for nid, n in self.nodes.items() if n.status == NodeStatus.FAILED}

    def teardown_note(self) -> str:
        """ "tearing down after a cancel: 1 node" while ``tearing_down``, else ""."""
        if self.tearing_down is None:
            return ""
        after = "a cancel" if self.tearing_down == RunStatus.CANCELLED else "its run timeout"
        left = self.counts.total - self.counts.done
        return f"tearing down after {after}: {left} node{'' if left == 1 else 's'}"


# Audit actions that say a call did not run: a deny rule (or no rule) refused it, the tool
# refused it (its ``reason``: a path outside the workspace, a domain not allowed, invalid
# arguments), a person rejected it.
DENIED = "deny"
REFUSED = "refused"
REJECTED = "rejected"
REFUSALS = frozenset({DENIED, REFUSED, REJECTED})


class AuditEntry(BaseModel):
    """One tool-policy decision (which tool an agent asked for, and what the policy said),
    a tool's refusal of a call the policy allowed (``refused``), or one step of an
    approval: requested, approved or rejected."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    id: str
    at: datetime
    node: str
    attempt: int
    tool: str
    action: str
    rule: str
    reason: str = ""
    args: str = ""
    by: str = ""
    """Who decided, for approval decisions (``dagwright`` when the request timed out)."""

    @property
    def refused(self) -> bool:
        """Whether the call was refused (by the policy, the tool or a person)."""
        return self.action in REFUSALS


class ApprovalStatus(enum.StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class ApprovalDecision(BaseModel):
    """What a person (or the timeout) decided about an approval request."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    status: ApprovalStatus
    by: str
    at: datetime
    comment: str = ""
    args: dict[str, Any] | None = None
    """Edited arguments that replace the proposed ones (None: as proposed)."""


class Approval(BaseModel):
    """A request for a person's approval: a node marked ``approval: required`` about to
    run (``kind`` node), or an agent's tool call its policy holds (``kind`` tool)."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    id: str
    run_id: str
    node: str
    kind: Literal["node", "tool"]
    action: str
    """The tool's name, or the node's worker type."""
    args: dict[str, Any]
    """The proposed arguments: the tool's input, or the node's params/instruction/code."""
    reasoning: str = ""
    """What the agent said before asking (its text of the turn)."""
    tool_use_id: str | None = None
    attempt: int = 0
    requested_at: datetime
    deadline: datetime
    decision: ApprovalDecision | None = None

    @property
    def status(self) -> ApprovalStatus:
        return self.decision.status if self.decision else ApprovalStatus.PENDING

    @property
    def subject(self) -> str:
        """What waits for the person, in words: ``the start of function node deploy`` or
        ``the call of tool web_fetch by node research``."""
        if self.kind == "node":
            return f"the start of {self.action} node {self.node}"
        return f"the call of tool {self.action} by node {self.node}"

    @property
    def asks(self) -> str:
        """The subject in a table's cell: ``start (function)``, ``call web_fetch``."""
        return f"start ({self.action})" if self.kind == "node" else f"call {self.action}"

    @property
    def effective_args(self) -> dict[str, Any]:
        """The arguments to act on: the edited ones if the approver gave any."""
        if self.decision is not None and self.decision.args is not None:
            return self.decision.args
        return self.args


SCORE_NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
SCORE_SOURCE_PATTERN = r"^[a-z][a-z0-9_-]{0,31}(:[A-Za-z0-9_.-]{1,64})?$"
MAX_SCORE_COMMENT = 2000
MAX_SCORE_BY = 128
SCORE_MODEL_CONFIG = ConfigDict(
    defer_build=True,
    frozen=True,
    extra="forbid",
    allow_inf_nan=False,
    use_attribute_docstrings=True,
)


class NewScore(BaseModel):
    """A score to give a run: feedback on how good its work was, which may arrive long
    after it ended (a user's thumbs, a reviewer's grade, an eval's scorer). Validated
    once, where it enters (the client, the API, the CLI), and written as it is."""

    model_config = SCORE_MODEL_CONFIG

    name: str = Field(pattern=SCORE_NAME_PATTERN)
    """What is scored (``correctness``, ``user.thumbs``): a run may hold several scores of
    one name, from several people."""
    value: float
    """The score: a finite number (a boolean is 1.0 or 0.0)."""
    comment: str | None = Field(None, max_length=MAX_SCORE_COMMENT)
    """Why, in the scorer's words (text, shown as text)."""
    source: str = Field(pattern=SCORE_SOURCE_PATTERN)
    """Where it came from: ``client``, ``api``, ``cli``, or ``eval:<eval id>``."""
    by: str = Field(min_length=1, max_length=MAX_SCORE_BY)
    """Who gave it: the API token's name, the OS user of the CLI or client, or the eval."""

    @field_validator("value", mode="before")
    @classmethod
    def _number(cls, value: Any) -> float:
        if isinstance(value, bool):
            return float(value)
        if not isinstance(value, int | float):
            raise ValueError("a score is a number or a boolean")
        try:
            return float(value)
        except OverflowError:
            raise ValueError("a score must be a finite number") from None

    @field_validator("by")
    @classmethod
    def _printable(cls, by: str) -> str:
        if not by.isprintable():
            raise ValueError("a scorer's name must be printable text")
        return by


class RunScore(NewScore):
    """A score a run holds (``Client.scores``): as given, with when it was written."""

    id: str
    """Its entry id in the run's scores: unique within the run, in the order written."""
    run_id: str
    at: datetime
    """When it was written (the Redis server's clock)."""


NodeLogSource = Literal["stdout", "stderr", "log"]


class NodeLogLine(BaseModel):
    """One line a node attempt left in its run's logs (``Client.logs``, ``dagwright logs``,
    ``GET /api/v1/runs/{run_id}/logs``): a line it printed to stdout or stderr, or one
    ``logging`` record made while it ran (an agent's LLM calls and tool calls among them).
    Redacted and bounded when captured (``node_log_max_bytes``)."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    id: str
    """Its entry id in the run's log stream: unique, in the order written, and the cursor
    to read on from (``after``)."""
    run_id: str
    node: str
    attempt: int
    """Which attempt of the node wrote it (1 the first; a retry is 2...)."""
    at: datetime
    """When it was written (the worker's clock)."""
    source: NodeLogSource
    """``stdout`` or ``stderr`` (printed), or ``log`` (a ``logging`` record)."""
    level: str | None = None
    """A ``log`` line's level (``INFO``, ``WARNING``...); None for printed lines."""
    logger: str | None = None
    """A ``log`` line's logger name."""
    text: str


class Event(BaseModel):
    """One entry of a run's event stream (``kind`` is e.g. ``node.succeeded``)."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    id: str
    run_id: str
    kind: str
    at: datetime
    node: str | None = None
    data: dict[str, str] = Field(default_factory=dict)
    """The event's fields as the stream holds them: text."""

    def typed_data(self) -> dict[str, str | int | float]:
        """``data`` with the fields that are numbers as numbers (``attempt``, ``delay_ms``,
        the tokens and cost of an ``llm.call``...), for JSON readers."""
        return {key: number_or_text(key, value) for key, value in self.data.items()}


# Event fields that hold numbers: integers, except ``cost_usd``.
NUMERIC_EVENT_FIELDS = frozenset(
    {"attempt", "fence", "nodes", "delay_ms", "timeout_ms", "latency_ms", "cached",
     "input_tokens", "output_tokens", "unpriced_tokens", "cost_usd",
     "cleared_tool_uses", "cleared_input_tokens"}
)  # fmt: skip


def number_or_text(key: str, value: str) -> str | int | float:
    if key not in NUMERIC_EVENT_FIELDS:
        return value
    try:
        return float(value) if key == "cost_usd" else int(value)
    except ValueError:  # not what it should be: shown as it is rather than lost
        return value


def from_ms(value: str | int | None) -> datetime | None:
    """A datetime from epoch milliseconds as Redis holds them (None stays None)."""
    return datetime.fromtimestamp(int(value) / 1000, tz=UTC) if value else None


def event_of(run_id: str, entry_id: str, fields: dict[str, str]) -> Event:
    """An event from its stream entry."""
    data = dict(fields)
    kind = data.pop("kind", "unknown")
    # the entry id's ms (prelude.lua's emit writes no `at`; streams written before do)
    at = from_ms(data.pop("at", None) or entry_id.split("-")[0]) or datetime.now(tz=UTC)
    node = data.pop("node", None)
    return Event(id=entry_id, run_id=run_id, kind=kind, at=at, node=node, data=data)
