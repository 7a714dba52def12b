"""The wire contract: every Redis key, queue and task name dagwright uses.

Nothing else builds a key string. A run's keys share the hash tag ``{<run_id>}`` so they
land in one Redis Cluster slot, and so do the per-run keys outside ``RUN_KEY_NAMES``
(scores, node logs, webhook log, DLQ statuses). Every
script and every MULTI touches the keys of one slot only; a global structure (the active
runs, the DLQ stream, the indexes...) is written in a step of its own, in an order that a
retry or the reconciler repairs (docs/internals/cluster.md), so the state store may be a
Redis/Valkey Cluster (``redis+cluster://``).

A run is stored column-wise: one hash per node attribute, keyed by node id (``state``,
``fence``, ``output``...), rather than one hash per node. A run therefore has a fixed set
of keys whatever its size: expiring a finished run is O(1) per key, and reading the state
of a 10,000-node run is a handful of HGETALLs.
"""

from __future__ import annotations

from dataclasses import dataclass

NODE_EXECUTE_TASK = "dagwright.node.execute"
PLAN_TASK = "dagwright.run.plan"
RECONCILE_TASK = "dagwright.run.reconcile"
SCHEDULE_FIRE_TASK = "dagwright.schedule.fire"

ORCHESTRATOR_QUEUE = "dw.orchestrator"
ORCHESTRATOR_TYPE = "orchestrator"  # what `dagwright worker --type` calls that queue
QUEUE_PREFIX = "dw."
# `dagwright worker --type function:<queue>` serves the functions declared with
# `@dagwright.function(queue=<queue>)`, on the Celery queue `dw.function:<queue>`.
FUNCTION_QUEUE_TYPE_PREFIX = "function:"
# Celery's broadcasts under dagwright's own names, so a Celery team's `celery control` /
# `inspect` on the same broker never reach dagwright's workers, nor dagwright's theirs
# (app.py). On kombu's Redis transport a fanout exchange is a PUB/SUB channel named after
# it (`/<db>.dagwright.pidbox`); replies go to `reply.dagwright.pidbox`, task events and
# worker heartbeats to `/<db>.dagwright.events`, their receivers' queues `dagwright.events.*`.
CONTROL_EXCHANGE = "dagwright"  # Celery names the mailbox exchange `<this>.pidbox`
EVENT_EXCHANGE = "dagwright.events"
EVENT_QUEUE_PREFIX = "dagwright.events"

# The order is part of the contract with the Lua prelude, which names KEYS[i] after it.
RUN_KEY_NAMES: tuple[str, ...] = (
    "run",  # hash: status, timestamps, counters, output node ids
    "plan",  # string: the validated plan as JSON
    "spec",  # hash node -> the node's JSON spec
    "deps",  # hash node -> JSON list of the nodes it depends on
    "dependents",  # hash node -> JSON list of the nodes depending on it
    "remaining",  # hash node -> count of dependencies not yet final (see run_if)
    "dispatch",  # hash node -> JSON {"queue", "time_limit_s", "task", "worker_type"} to publish it
    #             (queue: its type's, or dw.function:<q> for a function declared with queue=q)
    "state",  # hash node -> NodeStatus value
    "fence",  # hash node -> fencing token, +1 on every QUEUED transition
    "attempts",  # hash node -> how many times it was claimed
    "holder",  # hash node -> "<host>:<pid>" of the process running it
    "output",  # hash node -> JSON output
    "error",  # hash node -> JSON ErrorInfo of the last failure
    "started",  # hash node -> epoch ms of the last claim
    "finished",  # hash node -> epoch ms it reached a final state
    "queued",  # zset node -> epoch ms it was queued (removed at claim)
    "outbox",  # zset node -> epoch ms; queued but publish not yet confirmed
    "leases",  # zset node -> epoch ms its lease expires
    "retry",  # zset node -> epoch ms its retry is due
    "events",  # stream of every transition
    "done",  # stream with one entry, written when the run ends: what waiters block on
    "checkpoint",  # hash node -> JSON state saved by its worker (an agent's conversation)
    "usage",  # hash node -> JSON token usage and cost of its LLM calls
    "audit",  # stream of tool-policy decisions
    "workspace",  # hash path -> content: the run's workspace (redis backend)
    "deaths",  # hash node -> deaths of its process a surviving worker parent saw since its
    #            last recorded outcome (the poison guard, death.lua)
    "losses",  # hash node -> workers lost under it (lease expired) since its last outcome
    "first_failure",  # hash node -> epoch ms of its first failed attempt
    "approvals",  # hash "request:<node>" / "decision:<node>" -> JSON of its approval
    "reserved",  # hash node -> JSON worst case of its LLM call in flight (run budget)
    "spans",  # stream of telemetry.Span JSON: tool calls, sandbox runs, breaker events
    "waits",  # hash node -> JSON of what it waits on while parked (a breaker, a slot), see NodeWait
    "run_if",  # hash node -> its trigger rule, for the nodes whose rule is not all_succeeded
    "failed_deps",  # hash node -> count of its dependencies failed or blocked
    "skipped_deps",  # hash node -> count of its dependencies skipped
    "pool",  # zset "<queue>\t<node>" -> 0: queued nodes left unpublished for the workers of
    #          their queue to pull (execution/pool.py); all scored 0, so a queue's nodes are
    #          one lexicographic range. The run hash's pool_pulled_at: epoch ms of the last pull
    "countdown",  # hash node -> ms it waits once ready before it is queued (Node.countdown_s;
    #               only nodes with one). Delayed nodes wait in `retry` as retry_wait
    "settling",  # hash node -> JSON [outcome, offset, end, at_ms]: a succeeded node whose
    #              dependents are counted a chunk at a time (prelude.lua settle_dependents),
    #              `offset` of its first `end` counted so far; settle.lua counts on
    "nodes",  # string: a compacted succeeded run's state, attempts, started, finished and
    #           output columns folded into one JSON {since, rows: [[node, state, attempts,
    #           started, finished, output]]}, times as ms after `since` (compact.lua;
    #           snapshots.unfold reads it); the five hashes are dropped then
    "folding",  # string: `nodes` while compact.lua writes it a chunk at a time (the run
    #             hash's fold_cursor: where its HSCAN of `state` is), copied to `nodes`
    #             at the last chunk; readers read the five hashes until then
)


def queue_for(worker_type: str) -> str:
    """The Celery queue a worker type consumes."""
    return f"{QUEUE_PREFIX}{worker_type}"


def function_queue_type(queue: str) -> str:
    """What ``dagwright worker --type`` calls the queue of the functions declared with
    ``queue=`` ``queue``: ``function:<queue>`` (its Celery queue is ``dw.function:<queue>``)."""
    return f"{FUNCTION_QUEUE_TYPE_PREFIX}{queue}"


def function_queue(queue: str) -> str:
    """The Celery queue of the functions declared with ``queue=`` ``queue``."""
    return queue_for(function_queue_type(queue))


def worker_type_of_queue(queue: str) -> str:
    """What ``dagwright worker --type`` calls the worker of Celery queue ``queue``:
    ``orchestrator`` for the planner's, ``function:gpu`` for ``dw.function:gpu``."""
    if queue == ORCHESTRATOR_QUEUE:
        return ORCHESTRATOR_TYPE
    return queue.removeprefix(QUEUE_PREFIX)


def node_task_id(run_id: str, node_id: str, fence: int) -> str:
    """The Celery task id of a node's message: one per (run, node, fence), so a cancel
    can revoke the messages of the nodes it finds queued without having stored them."""
    return f"{run_id}.{node_id}.{fence}"


def team_task_id(run_id: str, node_id: str, fence: int) -> str:
    """The Celery task id a ``celery_task`` node sends its task under, from the claim
    that first sent it: derived, so a worker that dies before recording the send sends
    the same id again, and never dagwright's own task id of that node's message (a
    revoke of one must not reach the other, should the two apps share a control bus)."""
    return f"{run_id}.{node_id}.{fence}.team"


@dataclass(frozen=True)
class Keys:
    """Key names under one prefix (``settings.redis.key_prefix``)."""

    prefix: str = "dw:"

    def run_key(self, run_id: str, name: str) -> str:
        """One of a run's keys, by its name in ``RUN_KEY_NAMES``."""
        if name not in RUN_KEY_NAMES:
            raise KeyError(name)
        return f"{self.prefix}{{{run_id}}}:{name}"

    def run_keys(self, run_id: str) -> list[str]:
        """All of a run's keys, in the order the Lua scripts expect."""
        return [self.run_key(run_id, name) for name in RUN_KEY_NAMES]

    @property
    def run_index(self) -> str:
        """Sorted set run_id -> creation time (ms): every run still retained."""
        return f"{self.prefix}runs"

    def ended_runs(self, status: str) -> str:
        """Sorted set run_id -> epoch ms it ended, of the retained runs that ended with
        ``status`` (succeeded, failed, cancelled): what the metrics count (ZCARD) instead
        of reading every run. Joined by forget.lua, left by replay.lua, trimmed by the
        reconciler past ``retention_s``."""
        return f"{self.prefix}runs:ended:{status}"

    @property
    def active_runs(self) -> str:
        """Set of runs not yet finished: what the reconciler looks at."""
        return f"{self.prefix}runs:active"

    @property
    def trace_exports(self) -> str:
        """Sorted set run_id -> epoch ms its trace export is due: runs that ended and are
        not yet exported over OTLP (only while ``otlp_endpoint`` is set)."""
        return f"{self.prefix}otlp:pending"

    @property
    def webhooks_due(self) -> str:
        """Sorted set delivery id -> epoch ms its next attempt is due: the webhook
        deliveries not yet delivered nor given up (``dagwright/webhooks/``)."""
        return f"{self.prefix}webhooks:due"

    def webhook_log(self, run_id: str) -> str:
        """Hash delivery id -> JSON of one webhook delivery of the run and its attempts
        (expires with the run's keys)."""
        return f"{self.prefix}{{{run_id}}}:webhook-log"

    def run_scores(self, run_id: str) -> str:
        """Stream of the run's scores (``Client.score``), oldest first, one field ``score``
        holding its JSON; it expires with the run's keys (score.lua, forget.lua)."""
        return f"{self.prefix}{{{run_id}}}:scores"

    def run_logs(self, run_id: str) -> str:
        """Stream of the run's node logs (telemetry/node_logs.py), oldest first, one field
        ``line`` holding a line's JSON (node, attempt, source, text...), capped at
        ~``node_log_run_max_lines``; it expires with the run's keys (node_logs.lua,
        forget.lua) and persists again when a replay re-opens the run (replay.lua)."""
        return f"{self.prefix}{{{run_id}}}:logs"

    def team_tasks(self, run_id: str) -> str:
        """Hash node -> Celery task id of the run's ``celery_task`` nodes whose team task
        was sent and is not yet settled: what the reconciler reads results of, and what a
        stop revokes. Its own TTL (the Lua scripts never touch it)."""
        return f"{self.prefix}{{{run_id}}}:team-tasks"

    @property
    def team_task_runs(self) -> str:
        """Set of the runs that have (or had) a team task in flight: the reconciler reads
        those runs' ``team_tasks`` each pass and drops the runs that have none."""
        return f"{self.prefix}team-tasks:runs"

    @property
    def team_task_revokes(self) -> str:
        """List of team task ids a stopped run left in flight, for the reconciler (whose
        process has the team's app) to revoke through that app."""
        return f"{self.prefix}team-tasks:revoke"

    @property
    def stop_channel(self) -> str:
        """Pub/sub channel: a run id published when the run is stopped (cancelled or timed
        out), so the workers running its nodes stop them at once."""
        return f"{self.prefix}stop"

    def reconciler_bucket_lease(self, bucket: int) -> str:
        """String: the token of the reconciler that holds active-run bucket ``bucket``
        (``orchestrator/execution/buckets.py``), with a TTL of one lease period. A key of
        its own, tagged by the bucket, so the leases spread over a cluster's slots."""
        return f"{self.prefix}reconciler:{{b{bucket}}}:lease"

    @property
    def reconcilers(self) -> str:
        """Sorted set reconciler token -> epoch ms it last passed: the live reconcilers,
        which share the buckets evenly (each holds at most its share)."""
        return f"{self.prefix}reconcilers"

    @property
    def pooled_nodes(self) -> str:
        """Hash queue -> nodes waiting in the pools of every run (pulled fan-outs), kept by
        the run-state scripts in the step that changes a pool (prelude.lua pool_add,
        pool_remove, pool_clear); with the broker's messages waiting, a queue's ready
        backlog (``orchestrator/execution/backlog.py``). A queue with none has no field.
        One server only: on a Cluster (another slot than the runs') each run counts its
        own (``run_pooled``) and the reconcilers total them by bucket (``pooled_bucket``)."""
        return f"{self.prefix}pooled"

    def run_pooled(self, run_id: str) -> str:
        """Hash queue -> nodes waiting in this run's pool and yet to be released by its
        fan-outs in chunks, on a Cluster only: what ``pooled_nodes`` counts for every
        run on one server, kept by the same scripts in the same step (prelude.lua
        ``POOLED``) in the run's slot. A queue with none has no field, so the key is gone
        once the run's pool is empty (its end empties it)."""
        return f"{self.prefix}{{{run_id}}}:pooled"

    def pooled_bucket(self, bucket: int) -> str:
        """String, JSON queue -> pooled nodes of the active runs of reconciler bucket
        ``bucket`` (the sum of their ``run_pooled``), on a Cluster only: written by the
        bucket's holder each pass with a TTL of a few leases, summed by the backlog's
        readers (``orchestrator/execution/bucket_backlog.py``). Tagged by the bucket,
        as its lease is, so the buckets spread over the cluster's slots."""
        return f"{self.prefix}pooled:{{b{bucket}}}"

    def worker_heartbeat(self, hostname: str) -> str:
        """Hash a live worker refreshes: its queues and pid, with a short TTL."""
        return f"{self.prefix}workers:{hostname}"

    @property
    def worker_heartbeat_pattern(self) -> str:
        return f"{self.prefix}workers:*"

    @property
    def worker_capabilities(self) -> str:
        """Hash hostname -> JSON of what that worker can run, and until when the entry
        holds (workers/capabilities.py): read in one round trip by a submit. Outside
        ``workers:*``, which names only presence records."""
        return f"{self.prefix}worker-capabilities"

    def breaker_namespace(self, name: str) -> str:
        """pybreaker's namespace of a breaker (its keys: ``<namespace>:pybreaker:...``)."""
        return f"{self.prefix}breaker:{name}"

    def breaker_probes(self, name: str) -> str:
        """Counter of the probes a half-open breaker lets through."""
        return f"{self.prefix}breaker:{name}:probes"

    def breaker_last_failure(self, name: str) -> str:
        """String ``"<class>: <message>"`` of the last failure counted against a breaker,
        for the nodes that wait on it to show (expires with the breaker's open time)."""
        return f"{self.prefix}breaker:{name}:last_failure"

    @property
    def breakers(self) -> str:
        """Set of every breaker name in use (for `doctor`)."""
        return f"{self.prefix}breakers"

    @property
    def dlq(self) -> str:
        """The dead-letter stream."""
        return f"{self.prefix}dlq"

    @property
    def dlq_settled(self) -> str:
        """Sorted set entry id -> epoch ms of its id: the dead letters replayed while
        still in the DLQ stream (written after replay.lua, in its own step; a purge removes
        its entry from both), so that the ones waiting are the stream's length less these,
        counted without a scan."""
        return f"{self.prefix}dlq:settled"

    def dlq_status(self, run_id: str, entry_id: str) -> str:
        """A dead letter's fate (replayed, purged): set once, in the step that decides it.
        In its run's slot, so that replay.lua sets it in the step that re-queues the node."""
        return f"{self.prefix}{{{run_id}}}:dlq-status:{entry_id}"

    def metrics(self, family: str) -> str:
        """Hash of one metric family's counters over the whole deployment: the JSON list
        of its label values -> the running total (telemetry/counters.py)."""
        return f"{self.prefix}metrics:{family}"

    def memory_files(self, namespace: str) -> str:
        """Hash of one memory namespace's files: path (``/memories/...``) -> text."""
        return f"{self.prefix}memory:{{{namespace}}}:files"

    def memory_meta(self, namespace: str) -> str:
        """Hash of one memory namespace's ``version`` (+1 on every write: what a write
        checks it read), ``bytes`` and ``updated_ms``."""
        return f"{self.prefix}memory:{{{namespace}}}:meta"

    def memory_writers(self, namespace: str) -> str:
        """Hash of one memory namespace's writers, kept on a Cluster only (memory/store.py):
        ``fence:<run>/<node>`` -> the highest fence that node showed here, ``call:`` and
        ``record:<run>/<node>`` -> its last applied call and that call's record (JSON)."""
        return f"{self.prefix}memory:{{{namespace}}}:writers"

    @property
    def memory_namespaces(self) -> str:
        """Zset of the memory namespaces -> epoch ms of their last write (``memory ls``);
        a member whose files expired is dropped when read."""
        return f"{self.prefix}memory:namespaces"

    def memory_writes(self, run_id: str) -> str:
        """Hash of the memory writes a run's nodes made: ``<node>/<tool_use_id>`` -> JSON
        (namespace, command, paths, result). Written with the write, in one step (on a
        Cluster just after it, the namespace's writers holding it meanwhile): a resumed
        node finds its call there and does not write again."""
        return f"{self.prefix}{{{run_id}}}:memory_writes"

    @property
    def schedules(self) -> str:
        """Hash of every schedule: name -> its JSON (the source of truth; beat's entries
        are derived from it)."""
        return f"{self.prefix}schedules"

    def schedule_history(self, name: str) -> str:
        """List of the schedule's fires, newest first, capped."""
        return f"{self.prefix}schedule:{name}:history"

    def schedule_tick(self, name: str, tick: str) -> str:
        """Set once by the fire of one tick: a second fire of the same tick does nothing."""
        return f"{self.prefix}schedule:{name}:tick:{tick}"

    def schedule_firing(self, name: str) -> str:
        """Held (a lock, with a TTL) while one tick of the schedule decides and starts its
        run: two ticks fired at once would both see no run in progress."""
        return f"{self.prefix}schedule:{name}:firing"

    @property
    def pending_approvals(self) -> str:
        """Sorted set "<run_id>/<node_id>" -> deadline (ms) of every approval waiting for
        a person: what `approvals list` reads and the reconciler times out."""
        return f"{self.prefix}approvals:pending"

    def idempotency(self, digest: str) -> str:
        """The run a submit's idempotency key (by its sha256) started, for its TTL."""
        return f"{self.prefix}idempotency:{digest}"

    def run_followups(self, run_id: str) -> str:
        """Hash goal digest -> run id of the follow-ups a scheduled run proposed (its own
        TTL: the Lua scripts never touch it)."""
        return f"{self.prefix}{{{run_id}}}:followups"

    @property
    def beat_prefix(self) -> str:
        """celery-redbeat's keys (its entries and its lock)."""
        return f"{self.prefix}beat"

    @property
    def beat_lock(self) -> str:
        """The lock of the beat that fires the schedules (redbeat's ``<prefix>:lock``)."""
        return f"{self.beat_prefix}:lock"

    # API tokens and dashboard sessions (client/tokens.py). A token or session id is
    # never stored: only its sha256, so a dump of Redis lets no one in.

    @property
    def api_tokens(self) -> str:
        """Hash token id -> JSON of the token's record (name, scope, created, sha256)."""
        return f"{self.prefix}api-tokens"

    def api_token_by_digest(self, digest: str) -> str:
        """String: the id of the token whose sha256 is ``digest`` (what a request's
        credential is looked up by)."""
        return f"{self.prefix}api-token:{digest}"

    @property
    def api_tokens_last_used(self) -> str:
        """Hash token id -> epoch ms it last authenticated a request."""
        return f"{self.prefix}api-tokens:last-used"

    def api_session(self, digest: str) -> str:
        """String: JSON of a dashboard session (its token id, CSRF token), by the sha256
        of its cookie's value; expires after ``server_session_ttl_s``."""
        return f"{self.prefix}api-session:{digest}"

    def api_token_sessions(self, token_id: str) -> str:
        """Set of the session keys a token opened: revoking the token ends them."""
        return f"{self.prefix}api-token:{token_id}:sessions"

    # Evals (dagwright/evals/): each eval's keys share the hash tag ``{eval:<id>}``.

    @property
    def eval_index(self) -> str:
        """Sorted set eval id -> epoch ms it started: every eval still kept."""
        return f"{self.prefix}evals"

    def eval_record(self, eval_id: str) -> str:
        """String: JSON of an eval's ``EvalRecord`` (expires after ``eval_retention_s``)."""
        return f"{self.prefix}{{eval:{eval_id}}}:record"

    def eval_results(self, eval_id: str) -> str:
        """Hash ``<case>#<repeat>`` -> JSON ``CaseResult``: written once per case run."""
        return f"{self.prefix}{{eval:{eval_id}}}:results"

    def judge_verdict(self, digest: str) -> str:
        """String: JSON of a judge's verdict, by the sha256 of (rubric, scale, case input,
        output, judge model): re-scoring an unchanged output asks no model."""
        return f"{self.prefix}judge:{digest}"

    def llm_cache(self, digest: str) -> str:
        """A cached LLM response, by the sha256 of its canonical request."""
        return f"{self.prefix}llmcache:{digest}"

    # Concurrency limits (orchestrator/execution/limits.py). Each limit's keys share the hash
    # tag ``{limits:<name>}``: a slot of its own (a worker type's, a run's, a concurrency
    # key's), so a Cluster spreads the limits over its primaries. On one server a node's
    # limits are still taken in one script; on a Cluster one limit per step (decision 117).

    def limit_holders(self, name: str) -> str:
        """Zset ``<run>/<node>@<fence>`` -> epoch ms its slot expires (renewed while it
        runs) of the limit ``name`` (``type:<worker type>``, ``run:<run id>`` or
        ``key:<concurrency key>``)."""
        return f"{self.prefix}{{limits:{name}}}:holders"

    def limit_waiters(self, name: str) -> str:
        """Zset ``<run>/<node>`` -> epoch ms it first asked: the nodes parked for a slot."""
        return f"{self.prefix}{{limits:{name}}}:waiters"

    def limit_woken(self, name: str) -> str:
        """Zset ``<run>/<node>`` -> epoch ms its message was last published to take a
        slot (not published again within the grace)."""
        return f"{self.prefix}{{limits:{name}}}:woken"

    # Waits of flow control (docs/internals/flow-control.md): runs per concurrency key, and
    # rate limits per function or worker type.

    def key_holders(self, key: str) -> str:
        """Zset run id -> epoch ms it took a place: the runs of concurrency key ``key``
        (``customer=acme``) that run now (orchestrator/control/run_gates.py). A key's
        holders and waiters share the hash tag ``{<key>}``: gate_take.lua takes both."""
        return f"{self.prefix}runkey:{{{key}}}:holders"

    def key_waiters(self, key: str) -> str:
        """Zset run id -> epoch ms it was created: the runs of ``key`` waiting to start."""
        return f"{self.prefix}runkey:{{{key}}}:waiters"

    def rate_window(self, name: str) -> str:
        """Zset ``<run>/<node>@<fence>`` -> epoch ms it started: the starts of rate limit
        ``name`` (``function:fetch_prices``) within its period (execution/rates.py); the
        hash tag ``{rates}`` lets one script take a node's function and type rates."""
        return f"{self.prefix}{{rates}}:{name}"

    @property
    def limits(self) -> str:
        """Hash limit name -> its size: every limit with holders or waiters (what the
        reconciler looks at). A slot of its own: on a Cluster written in steps of their
        own (limits.py)."""
        return f"{self.prefix}{{limits}}:registry"

    def llm_rate(self, model: str, name: str) -> str:
        """A model's LLM rate window (llm/ratelimit.py), all in one slot per model:
        ``calls`` (zset reservation -> ms it counts from), ``tokens`` (hash reservation ->
        tokens, and the total), ``waiters`` and ``alive`` (zsets of waiting callers)."""
        return f"{self.prefix}{{llmrate:{model}}}:{name}"
