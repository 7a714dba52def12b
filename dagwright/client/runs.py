"""``Client``: submit runs and follow them; its sub-clients hold the other domains.

Celery (the app and its broker) is imported on the first call that publishes a task or
touches a beat entry, never by reading a run: ``dagwright status`` stays quick to start.
For the same reason the sub-clients, submission (the planner) and cancellation load on
first use, and the worker registry is built by the runtime only when something needs it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from dagwright.client.handle import ProgressCallback, RunHandle, result_of, still_running
from dagwright.client.redis_errors import ConnectedPart
from dagwright.client.run_options import RunOptions as RunOptions
from dagwright.client.run_options import build_run_request
from dagwright.connection import require_redis_url
from dagwright.errors import RunOptionError
from dagwright.models import (
    AuditEntry,
    Event,
    NodeLogLine,
    NodeWait,
    Plan,
    RunCounts,
    RunScore,
    RunState,
    RunStatus,
)
from dagwright.orchestrator.control.run_request import RunRequest
from dagwright.orchestrator.runtime import Runtime
from dagwright.settings import Settings

if TYPE_CHECKING:
    from dagwright.app import DagwrightCelery
    from dagwright.client.approvals import ApprovalClient
    from dagwright.client.dead_letters import DeadLetterClient
    from dagwright.client.following import EventFollower
    from dagwright.client.memory import MemoryClient
    from dagwright.client.node_detail import NodeDetail
    from dagwright.client.run_pages import RunPage
    from dagwright.client.schedules import ScheduleClient
    from dagwright.client.tokens import TokenClient
    from dagwright.client.webhooks import WebhookClient
    from dagwright.orchestrator.broker import Broker
    from dagwright.orchestrator.control.runnable import LiveCapabilities
    from dagwright.orchestrator.control.worker_waits import WorkerWaits
    from dagwright.orchestrator.runstate.scores import RunScores
    from dagwright.orchestrator.runstate.store import RunStore
    from dagwright.telemetry.run_trace import Trace

WAKE_UP_S = 1.0  # longest block on the event stream before re-reading the status
PROGRESS_INTERVAL_S = 0.25  # how often wait() reports progress when asked to
SAFETY_WAKE_UP_S = 5.0  # wait() re-reads the status this often even with no news


class Client(ConnectedPart):
    """Talks to the run-state store and the broker named by ``settings``.

    Runs are its own methods; ``dlq``, ``schedules`` and ``approvals`` are sub-clients
    sharing its runtime (one Redis connection pool, one Celery app). Each public method
    leaves Redis errors as typed ones (``ConnectedPart``, client/redis_errors.py).
    """

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.redis_url = require_redis_url(self.settings)

    @cached_property
    def runtime(self) -> Runtime:
        return Runtime.from_settings(self.settings.model_copy(update={"redis_url": self.redis_url}))

    @cached_property
    def live_workers(self) -> LiveCapabilities:
        """What the live workers can run, which a submit checks its plan against."""
        from dagwright.orchestrator.control.runnable import LiveCapabilities

        return LiveCapabilities(self.runtime)

    @cached_property
    def app(self) -> DagwrightCelery:
        from dagwright.tasks import build_app

        return build_app(self.runtime.settings)

    @cached_property
    def broker(self) -> Broker:
        from dagwright.tasks import CeleryBroker

        return CeleryBroker(self.app)

    @cached_property
    def dlq(self) -> DeadLetterClient:
        """The dead-letter queue: ``list``, ``get``, ``replay``, ``replay_all``,
        ``purge``, ``purge_all``, ``stats``."""
        from dagwright.client.dead_letters import DeadLetterClient

        return DeadLetterClient(self)

    @cached_property
    def schedules(self) -> ScheduleClient:
        """Schedules: ``add``, ``list``, ``get``, ``pause``, ``resume``, ``remove``,
        ``run_now``."""
        from dagwright.client.schedules import ScheduleClient

        return ScheduleClient(self)

    @cached_property
    def memory(self) -> MemoryClient:
        """Memory namespaces: ``list``, ``show``, ``remove``, ``export``, ``import_``,
        ``writes`` (of a run)."""
        from dagwright.client.memory import MemoryClient

        return MemoryClient(self)

    @cached_property
    def approvals(self) -> ApprovalClient:
        """Requests waiting for a person: ``list``, ``approve``, ``reject``."""
        from dagwright.client.approvals import ApprovalClient

        return ApprovalClient(self)

    @cached_property
    def tokens(self) -> TokenClient:
        """API tokens of ``dagwright server``: ``create``, ``list``, ``revoke``,
        ``authenticate``, and the dashboard's sessions."""
        from dagwright.client.tokens import TokenClient

        return TokenClient(self)

    @cached_property
    def webhooks(self) -> WebhookClient:
        """A run's webhook deliveries: ``deliveries``, ``redeliver``."""
        from dagwright.client.webhooks import WebhookClient

        return WebhookClient(self)

    def submit(
        self,
        plan: RunRequest | Plan | dict[str, Any] | str | Path | None = None,
        *,
        idempotency_key: str | None = None,
        **options: Unpack[RunOptions],
    ) -> RunHandle:
        """Start a run of a plan (a Plan, a dict, or a YAML/JSON file path), or of a
        ``goal``, which the planner first turns into a plan; or of a RunRequest (the
        same options as one frozen object, orchestrator/control/run_request.py). A
        repeated submit with the same ``idempotency_key`` (within
        ``settings.retention.idempotency_ttl_s``) returns the run the first one started.

        ``inputs`` are the run's arguments: checked against the plan's ``inputs:`` schema
        (its defaults filled in), they replace ``{{ inputs.<name> }}`` in its params and
        instructions, and function nodes read them as ``run_inputs`` (RunInputError,
        with every problem, if they do not fit). A goal's go to its planner.

        A goal's plan uses only ``worker_types`` (default: all), has at most ``max_nodes``
        nodes and chains of at most ``max_depth``; with ``replan`` a node that fails for
        good has its branch re-planned (``settings.planner.replan_max`` times per run).
        ``budget`` (a Budget or its dict: ``max_input_tokens``, ``max_output_tokens``,
        ``max_total_tokens``, ``max_cost_usd``) caps what the whole run's LLM calls may
        spend, overriding a plan's own ``budget`` limit by limit; ``budget_tokens`` is
        short for ``max_total_tokens``. ``max_concurrent_nodes`` caps how many of its
        nodes run at once (the others wait in order). ``timeout_s`` (else the plan's
        ``timeout_s``) is the run's wall-clock limit: past it, the run is stopped and
        fails. ``response_cache=True`` (else the plan's ``response_cache``) answers the
        run's agent calls, its planner's included, from the cross-run response cache when
        the very same request was answered before: no model call, 0 tokens.
        ``priority`` (1 to 5, higher first; else the plan's ``priority``, else 3) orders
        the run's nodes among all those waiting for a worker (a node's own ``priority``
        wins); a node that waited ``settings.dispatch.priority_aging_s`` goes ahead of all, so a
        low priority is never starved. ``llm_batch=True`` sends the run's agent calls, its
        planner's included, through the Message Batches API at half the price, each
        answered within 24 hours (nodes wait parked meanwhile, "waiting on batch ..."):
        for runs nobody waits on. ``memory`` names the memory namespace the run's agents
        use (``team-digest``: runs naming it share their memory; docs/memory.md): it wins
        over the plan's ``memory:`` (InputError for a name that is no namespace).
        ``webhooks`` (Webhook, its dict, or a URL for every run end) are told when the run
        ends, with the plan's own: a signed POST per end, at least once
        (docs/client-guide.md, "Webhooks"). ``not_before`` (a datetime, naive = UTC, or
        ISO 8601 text) or ``countdown_s`` (seconds; Celery's ``eta``/``countdown``) delay
        the run's start: it is written now (its id returned) and its roots wait until then
        ("waiting until ..."); its ``timeout_s`` still counts from now. Raises
        PlanError (with every problem) or InputError before anything is written:
        UnrunnablePlanError when workers are live and none of them can run some node (a
        function or worker type they do not import, no LLM endpoint for an agent), and
        IdempotencyConflictError when ``idempotency_key`` names a run started with
        another plan or goal; RunOptionError (a TypeError) for a keyword not named here,
        with the nearest one, or a bool, number or string option of another type. The
        handle's ``created`` is False when the key named an earlier run.
        """
        from dagwright.orchestrator.control.submission import start_run
        from dagwright.orchestrator.runstate.store import new_run_id

        request = self.run_request(plan, caller="Client.submit", **options)
        new_id = new_run_id()
        run_id = start_run(
            self.runtime,
            self.broker,
            request,
            run_id=new_id,
            idempotency_key=idempotency_key,
            live_workers=self.live_workers,
        )
        return RunHandle(self, run_id, created=run_id == new_id)

    def run_request(
        self,
        plan: RunRequest | Plan | dict[str, Any] | str | Path | None = None,
        *,
        caller: str = "Client.run_request",
        **options: Unpack[RunOptions],
    ) -> RunRequest:
        """What ``submit`` asks for (less the idempotency key), as the one RunRequest
        every door builds: the plan read, the options checked and coerced. A RunRequest
        given is taken as it is (then no options). Shared with ``AsyncClient.submit``,
        the HTTP API, the MCP server and the CLI; RunOptionError as ``submit``'s."""
        if isinstance(plan, RunRequest):
            if options:
                raise RunOptionError(
                    f"{caller}() takes a RunRequest or options, not both "
                    f"({', '.join(sorted(options))})"
                )
            return plan
        max_bytes = self.settings.limits.max_plan_file_bytes
        return build_run_request(caller, plan, options, max_plan_file_bytes=max_bytes)

    def get_run(self, run_id: str) -> RunHandle:
        """A handle on an existing run (UnknownRunError if there is none)."""
        self.runtime.store.run_status(run_id)
        return RunHandle(self, run_id)

    @cached_property
    def worker_waits(self) -> WorkerWaits:
        """Which queued nodes wait for a worker, as every read of a run says."""
        from dagwright.orchestrator.control.worker_waits import WorkerWaits

        return WorkerWaits(self.runtime, self.live_workers)

    def status(self, run_id: str, *, include_outputs: bool = True) -> RunState:
        """A snapshot of the run and its nodes (outputs and result too, unless told not to);
        a queued node no live worker serves says so in its ``waiting``."""
        state = self.runtime.store.read_state(run_id, include_outputs=include_outputs)
        return self.worker_waits.annotate(state)

    def counts(self, run_id: str) -> tuple[RunStatus, RunCounts]:
        return self.runtime.store.counts(run_id)

    def waits(self, run_id: str) -> dict[str, NodeWait]:
        """What each node parked waits on (an open breaker, a Message Batch, a slot), and
        each queued node no live worker serves, by node id."""
        parked = self.runtime.store.waits(run_id)
        return {**parked, **self.worker_waits.of_queued(run_id, parked)}

    def wait(
        self,
        run_id: str,
        timeout: float | None = None,
        *,
        on_progress: ProgressCallback | None = None,
    ) -> RunState:
        """Block until the run is final (or raise RunNotFinishedError after ``timeout`` s).

        Blocks on the run's ``done`` stream, so waiting costs Redis nothing while the run
        goes on; with ``on_progress(status, counts)`` it also wakes every
        ``PROGRESS_INTERVAL_S`` to report.
        """
        store = self.runtime.store
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = PROGRESS_INTERVAL_S if on_progress else SAFETY_WAKE_UP_S
        while True:
            status, counts = store.counts(run_id)
            if on_progress is not None:
                on_progress(status, counts)
            if status.is_final:
                return store.read_state(run_id)
            remaining = interval if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                raise still_running(run_id, status, counts, timeout)
            store.wait_until_done(run_id, min(remaining, interval))

    def result(self, run_id: str, timeout: float | None = None) -> Any:
        """Wait for the run and return its result, or raise RunFailedError/RunCancelledError."""
        return result_of(self.wait(run_id, timeout))

    def events(self, run_id: str, *, follow: bool = True, after: str = "0") -> Iterator[Event]:
        """The run's events from the start (or after stream id ``after``). With ``follow``,
        keeps waiting for new ones until the run is final.

        A final event ends them only when nothing follows it: a dead letter's replay
        re-opens an ended run (``run.reopened``), and its events go on after the old
        ``run.failed`` to the new end."""
        self.runtime.store.run_status(run_id)  # UnknownRunError now, not at first next()
        return self._follow_events(run_id, follow=follow, after=after)

    def _follow_events(self, run_id: str, *, follow: bool, after: str) -> Iterator[Event]:
        follower = self.follow_events(run_id, after=after)
        while not follower.finished:
            batch = follower.step(WAKE_UP_S if follow else None)
            yield from batch
            if not batch and not follow:
                return

    def follow_events(
        self, run_id: str, *, after: str = "0", store: RunStore | None = None
    ) -> EventFollower:
        """A cursor on the run's events after stream id ``after``, read a bounded wait at a
        time (``step(wait_s)``) until ``finished``: the run ended and all its events were
        read. What ``events`` iterates, for callers that must not block for long.
        ``store``: read with it rather than the client's own connection pool."""
        from dagwright.client.following import EventFollower

        return EventFollower(self, run_id, after=after, store=store)

    def next_events(
        self, run_id: str, *, after: str = "$", wait_s: float = WAKE_UP_S
    ) -> list[Event]:
        """The run's events after stream id ``after`` (``$``: from now on) in one batch,
        waiting up to ``wait_s`` for the first: what a live view sleeps on between redraws."""
        block_ms = max(1, int(wait_s * 1000))
        return self.runtime.store.read_events(run_id, after=after, block_ms=block_ms)

    def trace(self, run_id: str) -> Trace:
        """The run's trace: the run, each node attempt, LLM call, tool call, sandbox run,
        retry and breaker event, as spans (open ones end now). UnknownRunError if there
        is no such run."""
        from dagwright.telemetry.trace_reads import read_trace

        return read_trace(self.runtime.store, run_id)

    def audit(self, run_id: str) -> list[AuditEntry]:
        """Every tool-policy decision the run's agents met, oldest first."""
        return self.runtime.store.read_audit(run_id)

    @cached_property
    def run_scores(self) -> RunScores:
        """The runs' scores in Redis (what ``score`` and ``scores`` call)."""
        from dagwright.orchestrator.runstate.scores import RunScores

        runtime = self.runtime
        return RunScores(
            runtime.client, runtime.keys, max_scores=self.settings.retention.run_scores_max
        )

    def score(
        self,
        run_id: str,
        name: str,
        value: float | bool,
        comment: str | None = None,
        *,
        source: str = "client",
        by: str | None = None,
    ) -> RunScore:
        """Score a run, now or long after it ended: ``name`` says what is scored
        (``correctness``, ``user.thumbs``), ``value`` a finite number (True/False: 1.0/0.0),
        ``comment`` why; ``by`` who (default: the OS user). A run keeps every score
        given, several of one name too, until it expires. ScoreError for a bad name,
        value or comment, ScoreLimitError past ``run_scores_max``, UnknownRunError."""
        from dagwright.client.scoring import new_score

        given = new_score(name, value, comment, source=source, by=by)
        return self.run_scores.add(run_id, given)

    def scores(self, run_id: str) -> list[RunScore]:
        """Every score of the run, oldest first (UnknownRunError if there is no such run)."""
        return self.run_scores.read(run_id)

    def logs(
        self,
        run_id: str,
        node: str | None = None,
        after: str | None = None,
        *,
        limit: int = 1000,
    ) -> list[NodeLogLine]:
        """The run's node logs, oldest first: what its nodes printed (stdout, stderr) and
        logged (``logging`` records, an agent's LLM and tool calls), each line with its node
        and attempt; only ``node``'s if given. ``after``: the id of the last line read
        (read on from there, as ``dagwright logs -f`` does); at most ``limit`` lines (1 to
        10,000). UnknownRunError, UnknownNodeError; InputError for a bad cursor or limit."""
        return self.runtime.node_logs.read(run_id, node, after, limit)

    def cancel(self, run_id: str, reason: str = "cancelled by a user") -> RunState:
        """Cancel a run: no node starts any more, queued messages are revoked, running
        nodes are told to stop (sandboxed programs are killed) within about a second, and
        a cancelled run never resumes."""
        from dagwright.orchestrator.control.cancellation import cancel_run

        runtime = self.runtime
        runtime.store.run_status(run_id)
        cancel_run(runtime, self.broker, run_id, reason)
        return runtime.store.read_state(run_id)

    def list_runs(self, limit: int = 20) -> list[RunState]:
        """The most recent runs, newest first, as summaries (no nodes)."""
        store = self.runtime.store
        return [
            store.read_state(run_id, include_nodes=False)
            for run_id in store.list_runs(limit)
            if store.exists(run_id)
        ]

    def find_runs(
        self,
        *,
        status: RunStatus | str | None = None,
        text: str = "",
        limit: int = 20,
        cursor: str | None = None,
    ) -> RunPage:
        """A page of run summaries (no nodes), newest first: of a ``status``, whose goal or
        id contains ``text`` (case-insensitive), from ``cursor`` (the last page's
        ``next_cursor``) on. InputError for an unknown status, a bad cursor or limit."""
        from dagwright.client.run_pages import RunFilter, find_runs, parse_status

        where = RunFilter(status=parse_status(status), text=text)
        return find_runs(self.runtime.store, where, limit, cursor)

    def node(self, run_id: str, node_id: str) -> NodeDetail:
        """One node in full: its state, plan entry, inputs (its dependencies' outputs),
        transcript (an agent's checkpointed messages), LLM calls (tokens, cost, duration)
        and trace spans. UnknownRunError, or UnknownNodeError if the run has no such node."""
        from dagwright.client.node_detail import read_node_detail
        from dagwright.redaction import known_secrets

        secrets = known_secrets(self.runtime.settings)
        return read_node_detail(self.runtime.store, run_id, node_id, self.worker_waits, secrets)

    def worker_types(self) -> list[dict[str, Any]]:
        """The registered worker types, as ``dagwright worker-types --json`` prints them."""
        from dagwright.client.catalog import describe_worker_types

        return describe_worker_types(self.settings)
