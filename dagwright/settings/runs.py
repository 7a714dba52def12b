"""How runs are bounded, dispatched, throttled, kept and scheduled."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import AfterValidator, Field, field_validator, model_validator

from dagwright.rates import checked_rates
from dagwright.settings.section import Section


class RunLimits(Section):
    """Bounds on what a run may be given: its plan, params, outputs, and times."""

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

    max_start_delay_s: float = Field(30 * 24 * 3600.0, gt=0)
    """Furthest in the future a run's delayed start may be (``not_before``/``countdown_s``
    at submit); a later one is refused. A node's ``countdown_s`` is bounded by its plan."""

    run_max_age_s: int | None = Field(7 * 24 * 3600, ge=60)
    """Oldest a run may get without finishing: past it (from its creation, or its last
    re-opening by a replay) the reconciler fails its nodes still at work, each with a
    dead letter saying so (``dlq replay`` re-opens the run), and the run ends failed
    with that reason. None: no bound (a run with a ``timeout_s`` is bounded by it too)."""


class DispatchSettings(Section):
    """How nodes reach workers: leases, heartbeats, the reconciler, priorities, deliveries."""

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

    batch_window_s: float = Field(0.02, ge=0, le=1)
    """How long a worker pulling a fan-out's quick nodes, or running a chain's, may hold
    their successes, to record them together with the claim of the next ones: one step
    for up to ``batch_max_nodes`` nodes (orchestrator/execution/eager.py; a chain's next
    nodes run before the success before each is recorded, pending meanwhile). A batch is
    sized so that its nodes, at the pace of the last one, run within this: a slow node is
    taken alone and recorded at once. A success shows about this much later (a node much
    slower than the one it was paced by delays those held before it by its own time), and
    the nodes of a worker lost whole run again elsewhere (none was recorded). At most a
    quarter of ``lease_s`` is used; 0: each success is recorded on its own."""

    batch_max_nodes: int = Field(16, ge=1, le=64)
    """Most nodes of a run one worker takes, and records, in one step (1: one at a time,
    and no chain is run ahead)."""

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

    def batch_window(self) -> float:
        """``batch_window_s`` as used: well within a lease, which the nodes held keep."""
        return min(self.batch_window_s, self.lease_s / 4)

    @model_validator(mode="after")
    def _check_timing(self) -> DispatchSettings:
        if self.heartbeat_interval_s >= self.lease_s:
            raise ValueError(
                f"heartbeat_interval_s ({self.heartbeat_interval_s}) must be below lease_s "
                f"({self.lease_s}), or every lease expires before it is renewed"
            )
        return self


class ThrottleSettings(Section):
    """Shared limits across runs: concurrency slots, rate limits, and how long to wait on them."""

    concurrency_limits: dict[str, int] = Field(default_factory=dict)
    """Most nodes of a worker type running at once over every worker, e.g.
    ``DAGWRIGHT_CONCURRENCY_LIMITS='{"researcher": 4}'``; a type not listed is not
    limited. Give every worker the same value. Nodes over the limit wait in order."""

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

    @field_validator("concurrency_limits")
    @classmethod
    def _positive_limits(cls, limits: dict[str, int]) -> dict[str, int]:
        bad = sorted(name for name, limit in limits.items() if limit < 1)
        if bad:
            raise ValueError(f"limits must be at least 1 (got {', '.join(bad)})")
        return limits


class RetentionSettings(Section):
    """How long what runs leave behind is kept, and how much of it."""

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

    events_maxlen: int = Field(100_000, ge=100)
    """Approximate cap of a run's event stream."""

    run_scores_max: int = Field(1000, ge=1, le=100_000)
    """Most scores one run may hold (``Client.score``, ``POST /api/v1/runs/{id}/scores``):
    past it a score is refused (ScoreLimitError, HTTP 422), so that feedback cannot grow a
    run's keys without end. They expire with the run."""

    dlq_retention_s: int = Field(30 * 24 * 3600, ge=3600)
    """How long dead letters are kept."""

    idempotency_ttl_s: int = Field(24 * 3600, ge=60)
    """How long a submit's idempotency key keeps returning the run it started."""


class NodeLogSettings(Section):
    """What a node attempt's output and log records may keep."""

    prefix: ClassVar[str] = "node_log_"

    max_bytes: int = Field(65_536, ge=0, le=16 * 1024 * 1024)
    """Most bytes of logs kept per node attempt (its stdout, stderr, ``logging`` records
    and an agent's notable events); past it the rest is counted and a ``… truncated N
    bytes`` line closes the attempt's logs. 0 keeps none (capture off)."""

    max_line_chars: int = Field(2_000, ge=80, le=100_000)
    """Longest log line kept; a longer one is cut (and marked ``…``)."""

    run_max_lines: int = Field(100_000, ge=100)
    """Approximate cap of a run's log stream: past it the oldest lines are dropped, so a
    run of 10,000 chatty nodes stays bounded. The logs expire with the run."""


class WorkspaceSettings(Section):
    """Where a run's shared workspace files live, and how much they may hold."""

    prefix: ClassVar[str] = "workspace_"

    backend: str = Field("redis", pattern="^(redis|disk)$")
    """Where the per-run workspace of the workspace tools lives: ``redis`` (shared by
    every worker host) or ``disk`` (under ``workspace_dir``, for one host)."""

    dir: Path | None = None
    """Root of disk workspaces (default: ``<data_dir>/workspaces``)."""

    max_bytes: int = Field(1_000_000, ge=1024)
    """Largest file the workspace tools write or read."""


class BeatSettings(Section):
    """The schedules' beat: how often it looks, and its lock."""

    prefix: ClassVar[str] = "beat_"

    interval_s: float = Field(1.0, gt=0, le=60)
    """How often beat looks for due schedules (and extends its lock)."""

    lock_timeout_s: int = Field(10, ge=2)
    """A beat that stops extending its lock for this long is replaced by a standby beat."""


class BreakerSettings(Section):
    """The circuit breakers of worker types: when they open, and how they close again."""

    prefix: ClassVar[str] = "breaker_"

    fail_max: int = Field(5, ge=1)
    """Failures in a row that open a dependency's circuit breaker."""

    reset_timeout_s: float = Field(30.0, gt=0)
    """How long an open breaker stays open before letting probes through."""

    max_probes: int = Field(1, ge=1)
    """Calls let through at once while a breaker is half-open, over every worker."""

    max_wait_s: float = Field(300.0, gt=0)
    """Longest time a node waits on open breakers, one open period after another, before
    it fails into the DLQ (``BreakerWaitExpiredError``; replay it once the dependency is
    back). No node waits for ever on a dependency that stays down."""
