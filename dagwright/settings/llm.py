"""The LLM client and what calls models: agents' context, the planner, evals' judge."""

from __future__ import annotations

import datetime as dt
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from dagwright.settings.section import Section


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


class LLMSettings(Section):
    """The LLM client of a process: endpoint, key, model, retries, shared rate limits,
    caches, batches and the price list."""

    prefix: ClassVar[str] = "llm_"
    also_env: ClassVar[dict[str, str]] = {
        "api_key": "ANTHROPIC_API_KEY",
        "base_url": "ANTHROPIC_BASE_URL",
    }
    flat_names: ClassVar[dict[str, str]] = {
        "api_key": "anthropic_api_key",
        "base_url": "anthropic_base_url",
        "default_model": "default_model",
        "model_lifecycle_date": "model_lifecycle_date",
        "model_prices": "model_prices",
        "web_search_usd_per_1k": "web_search_usd_per_1k",
    }

    api_key: SecretStr | None = None
    """API key of the Anthropic API (also read from ANTHROPIC_API_KEY)."""

    base_url: str | None = None
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

    provider: Literal["anthropic", "bedrock", "vertex"] = "anthropic"
    """Who serves the models: the Anthropic API (``anthropic_api_key``,
    ``anthropic_base_url``), Amazon Bedrock (AWS credentials from the environment: keys,
    ``AWS_PROFILE``...) or Google Vertex AI (application default credentials). Retries,
    breakers, rate limits and accounting are the same for each; model ids are the
    provider's (e.g. ``anthropic.claude-sonnet-5-5`` on Bedrock)."""

    region: str | None = None
    """Region of Bedrock or Vertex AI (default: the SDK's, from ``AWS_REGION`` or
    ``CLOUD_ML_REGION``)."""

    vertex_project_id: str | None = None
    """Google Cloud project of Vertex AI (default: ``ANTHROPIC_VERTEX_PROJECT_ID``)."""

    connect_timeout_s: float = Field(5.0, gt=0)
    """Time to open a connection to the LLM API: short, since nothing that answers takes
    long to accept one."""

    idle_timeout_s: float = Field(60.0, gt=0)
    """Longest silence between two events of a streamed LLM answer (the API sends ``ping``
    events while it works): a stream silent longer is stalled, and that counts as an
    outage of the model. Replaces one timeout of the whole call, which a long generation
    would exceed while making progress."""

    min_tokens_per_s: float = Field(5.0, gt=0)
    """The slowest generation still waited for: one call's overall deadline is
    ``llm_idle_timeout_s + max_tokens / llm_min_tokens_per_s`` (4096 tokens: 15 min). A
    call past its deadline is ended and retried by the node, but is not an outage."""

    max_attempts: int = Field(4, ge=1, le=20)
    """Attempts of one LLM call on 408/409/429/5xx/529 and connection errors (the only
    retry layer of an LLM call; the SDK's own retries are off)."""

    retry_after_cap_s: float = Field(30.0, ge=0)
    """Longest wait honoured from a retry-after header."""

    retry_backoff_s: float = Field(1.0, ge=0)
    """First delay between attempts of an LLM call without retry-after (doubles, jittered)."""

    cache_enabled: bool = False
    """Let every agent's LLM requests be answered from the response cache in Redis (an
    identical earlier request's answer, without a call). Off: only the agent types that
    set ``response_cache`` use it."""

    cache_ttl_s: int = Field(7 * 24 * 3600, ge=60)
    """How long a cached LLM response is kept."""

    prompt_cache_ttl: Literal["5m", "1h", "off"] = "5m"
    """How long the API keeps the prompt prefixes an agent's requests mark for caching
    (tools, system, the conversation so far): ``5m`` (writes cost 1.25x input, refreshed
    by every read), ``1h`` (writes cost 2x; for agents whose turns are minutes apart, such
    as those waiting on approvals or slow tools) or ``off``."""

    max_tokens_cap: int = Field(64_000, ge=1)
    """Largest ``max_tokens`` the one retry of an agent turn whose tool call was cut at
    ``max_tokens`` is made with (twice the turn's); also never more than the model's
    output limit. A cut text answer is continued instead."""

    refusal_fallback_model: str | None = None
    """Model an agent turn is retried with when the model refuses (``stop_reason:
    refusal``), for agent types that name no ``fallback_model``; unset: a refusal fails
    the node."""

    batch_types: list[str] = Field(default_factory=list)
    """Agent types whose LLM calls always go through the Message Batches API, at half
    the price and with answers within 24 hours (``llm/batches.py``); a run or schedule
    asks for it with ``llm_batch`` / ``--batch``. For work nobody waits on."""

    batch_poll_s: float = Field(60.0, gt=0, le=3600)
    """How long a node waiting on its Message Batch stays parked between two polls."""

    batch_max_wait_s: float = Field(24 * 3600.0, gt=0, le=7 * 24 * 3600)
    """Longest a node waits on one Message Batch; past it the batch is cancelled and the
    node dead-lettered (``BatchWaitExpiredError``). The API itself expires a batch after
    24 hours (the node then sends its call again, as a retry)."""

    rate_limits: dict[str, LLMRateLimit] = Field(default_factory=dict)
    """Requests and tokens per minute by model id, over every worker, e.g.
    ``DAGWRIGHT_LLM_RATE_LIMITS='{"claude-sonnet-5-5": {"tokens_per_minute": 400000}}'``;
    ``"*"`` applies to each model not listed. A call waits for room, first come first
    served, up to ``llm_rate_max_wait_s``."""

    rate_window_s: float = Field(60.0, gt=0)
    """The window of ``llm_rate_limits`` (a minute; tests shorten it)."""

    rate_max_wait_s: float = Field(300.0, ge=0)
    """Longest an LLM call waits for its rate limit; then its node is retried later."""

    web_search_usd_per_1k: float = Field(10.0, ge=0)
    """Price of 1,000 web searches in USD (the published $10), added to a call's cost."""


class AgentContextSettings(Section):
    """How an agent's conversation is kept within bounds as it grows."""

    prefix: ClassVar[str] = "agent_context_"

    management: Literal["auto", "api", "summary", "off"] = "auto"
    """How an agent's conversation is kept within bounds as it grows: ``api`` clears older
    tool results through the Messages API's context editing (``clear_tool_uses``, beta);
    ``summary`` replaces older turns by a summary the model writes (one bounded call,
    checkpointed); ``auto`` uses ``api`` on the models that take it and ``summary`` on
    others; ``off`` keeps every turn (the context window, ``max_turns`` and the budget
    are then the only bounds)."""

    trigger_tokens: int = Field(30_000, ge=1_000)
    """Input tokens of an agent's prompt past which its older tool results are cleared
    (``api``) or its older turns summarised (``summary``)."""

    keep_tool_uses: int = Field(2, ge=0)
    """The latest tool calls whose results are always kept whole."""

    clear_batch: int = Field(6, ge=1)
    """Tool results cleared together: the cleared part of the prompt then stays the same
    (and is read from the prompt cache) for that many turns, instead of changing, and
    being written again, every turn."""

    summary_max_tokens: int = Field(4_096, ge=256)
    """``max_tokens`` of the call that summarises older turns (``summary``)."""


class PlannerSettings(Section):
    """The planner: its model, the size of what it plans, and the knobs a planned plan may
    set (checked as plan problems, which go back to the planner, ``planning/bounds.py``)."""

    prefix: ClassVar[str] = "planner_"
    flat_names: ClassVar[dict[str, str]] = {
        "max_goal_chars": "max_goal_chars",
        "max_context_chars": "max_context_chars",
        "replan_enabled": "replan_enabled",
        "replan_max": "replan_max",
    }

    model: str | None = None
    """Model of the planner (default: ``default_model``)."""

    max_repairs: int = Field(2, ge=0, le=10)
    """Times the planner may fix a rejected plan before the run fails."""

    max_nodes: int = Field(30, ge=1)
    """Default limit on the nodes of a planned DAG (``--max-nodes``)."""

    max_depth: int = Field(8, ge=1)
    """Default limit on the longest dependency chain of a planned DAG (``--max-depth``)."""

    allow_approvals: bool = False
    """Let a planned node set ``approval: required`` (a person must approve it). Off: the
    planner is told to fix such a plan; plans you write are not limited."""

    allow_python: bool = False
    """Let a goal's plan use ``python`` nodes (model-written code, run in the sandbox)
    when the goal names no worker types; a goal that lists ``python`` in ``-w`` /
    ``worker_types`` may always."""

    max_attempts: int = Field(5, ge=1, le=100)
    """Most ``retry.max_attempts`` a planned node may ask for."""

    max_timeout_s: float = Field(1800.0, gt=0)
    """Longest ``timeout_s`` a planned node may ask for (``max_timeout_s`` bounds every plan)."""

    max_retry_delay_s: float = Field(300.0, ge=0)
    """Longest delay between two attempts that a planned node's ``retry`` may lead to."""

    max_sleep_s: float = Field(300.0, ge=0)
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


class EvalSettings(Section):
    """Evals: the judge's model, and how long records and verdicts are kept."""

    prefix: ClassVar[str] = "eval_"

    judge_model: str | None = None
    """Model of an eval's LLM judge when its scorer names none (default: ``default_model``)."""

    retention_s: int = Field(90 * 24 * 3600, ge=3600)
    """How long an eval's record and results are kept (its runs expire after
    ``retention_s``; the results keep their outputs, so a baseline outlives them)."""

    judge_cache_ttl_s: int = Field(90 * 24 * 3600, ge=60)
    """How long a judge's verdict is kept for the same rubric, input, output and model."""
