"""The Python client: submit plans, follow runs, fetch results, cancel.

::

    from dagwright import Client, load_plan

    client = Client()                          # Settings() from DAGWRIGHT_* / dagwright.toml
    run = client.submit(load_plan("examples/plans/diamond.yaml"))
    print(run.result(timeout=60))              # waits; raises RunFailedError if it failed
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property, wraps
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from dagwright.app import DagwrightCelery
from dagwright.connection import require_redis_url, translate_redis_errors
from dagwright.dlq import (
    Classification,
    DeadLetter,
    DeadLetterFilter,
    DeadLetterStats,
    DeadLetterStatus,
)
from dagwright.errors import (
    DeadLetterError,
    InputError,
    RunCancelledError,
    RunFailedError,
    RunNotFinishedError,
    ScheduleError,
)
from dagwright.models import (
    Approval,
    AuditEntry,
    Budget,
    Event,
    Plan,
    RunCounts,
    RunState,
    RunStatus,
    Usage,
)
from dagwright.orchestrator.broker import Broker, dispatch
from dagwright.orchestrator.control.approvals import ApprovalBook
from dagwright.orchestrator.control.cancellation import cancel_run
from dagwright.orchestrator.control.replay import (
    ReplayResult,
    dead_letters,
    replay,
    replay_matching,
)
from dagwright.orchestrator.control.submission import check_plan, start_run
from dagwright.orchestrator.runtime import Runtime
from dagwright.planning.goals import (
    GoalOptions,
    plan_locally,
    plan_request,
    requested_budget,
)
from dagwright.plans.files import load_plan, parse_plan
from dagwright.schedules.definition import Catchup, Overlap, Schedule, parse_schedule
from dagwright.schedules.firing import fire_schedule, manual_tick
from dagwright.schedules.store import Fire, schedule_store
from dagwright.settings import Settings
from dagwright.tasks import (
    CeleryBroker,
    build_app,
    drop_entry,
    next_fire_at,
    parse_cron,
    sync_entry,
)
from dagwright.telemetry.run_trace import Trace
from dagwright.telemetry.trace_reads import read_trace
from dagwright.workers import default_registry, load_plugins

P = ParamSpec("P")
T = TypeVar("T")

ProgressCallback = Callable[[RunStatus, RunCounts], None]

WAKE_UP_S = 1.0  # longest block on the event stream before re-reading the status
PROGRESS_INTERVAL_S = 0.25  # how often wait() reports progress when asked to
SAFETY_WAKE_UP_S = 5.0  # wait() re-reads the status this often even with no news


def _translated(method: Callable[P, T]) -> Callable[P, T]:
    """Redis connection errors leave the client as BrokerUnavailableError."""

    @wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        client: Client = args[0]  # type: ignore[assignment]
        with translate_redis_errors(client.redis_url):
            return method(*args, **kwargs)

    return wrapper


class Client:
    """Talks to the run-state store and the broker named by ``settings``."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.redis_url = require_redis_url(self.settings)

    @cached_property
    def runtime(self) -> Runtime:
        return Runtime.from_settings(self.settings.model_copy(update={"redis_url": self.redis_url}))

    @cached_property
    def app(self) -> DagwrightCelery:
        return build_app(self.runtime.settings)

    @cached_property
    def broker(self) -> Broker:
        return CeleryBroker(self.app)

    @_translated
    def submit(
        self,
        plan: Plan | dict[str, Any] | str | Path | None = None,
        *,
        goal: str | None = None,
        context: str = "",
        worker_types: list[str] | None = None,
        max_nodes: int | None = None,
        max_depth: int | None = None,
        replan: bool | None = None,
        budget: Budget | dict[str, Any] | None = None,
        budget_tokens: int | None = None,
        idempotency_key: str | None = None,
        max_concurrent_nodes: int | None = None,
        timeout_s: float | None = None,
    ) -> RunHandle:
        """Start a run of a plan (a Plan, a dict, or a YAML/JSON file path), or of a
        ``goal``, which the planner first turns into a plan. A repeated submit with the
        same ``idempotency_key`` (within ``settings.idempotency_ttl_s``) returns the run
        the first one started.

        A goal's plan uses only ``worker_types`` (default: all), has at most ``max_nodes``
        nodes and chains of at most ``max_depth``; with ``replan`` a node that fails for
        good has its branch re-planned (``settings.replan_max`` times per run).
        ``budget`` (a Budget or its dict: ``max_input_tokens``, ``max_output_tokens``,
        ``max_total_tokens``, ``max_cost_usd``) caps what the whole run's LLM calls may
        spend, overriding a plan's own ``budget`` limit by limit; ``budget_tokens`` is
        short for ``max_total_tokens``. ``max_concurrent_nodes`` caps how many of its
        nodes run at once (the others wait in order). ``timeout_s`` (else the plan's
        ``timeout_s``) is the run's wall-clock limit: past it, the run is stopped and
        fails. Raises PlanError (with every problem) or InputError before anything is
        written.
        """
        options = GoalOptions(
            context=context,
            worker_types=worker_types,
            max_nodes=max_nodes,
            max_depth=max_depth,
            replan=replan,
            budget=requested_budget(budget, budget_tokens),
        )
        run_id = start_run(
            self.runtime,
            self.broker,
            plan=_coerce_plan(plan) if plan is not None else None,
            goal=goal,
            options=options,
            idempotency_key=idempotency_key,
            max_concurrent_nodes=max_concurrent_nodes,
            timeout_s=timeout_s,
        )
        return RunHandle(self, run_id)

    @_translated
    def get_run(self, run_id: str) -> RunHandle:
        """A handle on an existing run (UnknownRunError if there is none)."""
        self.runtime.store.run_status(run_id)
        return RunHandle(self, run_id)

    @_translated
    def status(self, run_id: str, *, include_outputs: bool = True) -> RunState:
        """A snapshot of the run and its nodes (outputs and result too, unless told not to)."""
        return self.runtime.store.read_state(run_id, include_outputs=include_outputs)

    @_translated
    def counts(self, run_id: str) -> tuple[RunStatus, RunCounts]:
        return self.runtime.store.counts(run_id)

    @_translated
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
                raise RunNotFinishedError(
                    f"run {run_id} is still {status.value} after {timeout:g}s "
                    f"({counts.done}/{counts.total} nodes done); it keeps running",
                    run_id=run_id,
                )
            store.wait_until_done(run_id, min(remaining, interval))

    def result(self, run_id: str, timeout: float | None = None) -> Any:
        """Wait for the run and return its result, or raise RunFailedError/RunCancelledError."""
        return result_of(self.wait(run_id, timeout))

    @_translated
    def events(self, run_id: str, *, follow: bool = True, after: str = "0") -> Iterator[Event]:
        """The run's events from the start (or after stream id ``after``). With ``follow``,
        keeps waiting for new ones until the run is final."""
        self.runtime.store.run_status(run_id)  # UnknownRunError now, not at first next()
        return self._follow_events(run_id, follow=follow, after=after)

    def _follow_events(self, run_id: str, *, follow: bool, after: str) -> Iterator[Event]:
        store = self.runtime.store
        block_ms = int(WAKE_UP_S * 1000) if follow else None
        cursor = after
        while True:
            with translate_redis_errors(self.redis_url):
                batch = store.read_events(run_id, after=cursor, block_ms=block_ms)
                over = not batch and (not follow or store.run_status(run_id).is_final)
            for event in batch:
                cursor = event.id
                yield event
                if event.kind in FINAL_RUN_EVENTS:
                    return
            if over:
                return

    @_translated
    def next_events(
        self, run_id: str, *, after: str = "$", wait_s: float = WAKE_UP_S
    ) -> list[Event]:
        """The run's events after stream id ``after`` (``$``: from now on) in one batch,
        waiting up to ``wait_s`` for the first: what a live view sleeps on between redraws."""
        block_ms = max(1, int(wait_s * 1000))
        return self.runtime.store.read_events(run_id, after=after, block_ms=block_ms)

    @_translated
    def trace(self, run_id: str) -> Trace:
        """The run's trace: the run, each node attempt, LLM call, tool call, sandbox run,
        retry and breaker event, as spans (open ones end now). UnknownRunError if there
        is no such run."""
        return read_trace(self.runtime.store, run_id)

    @_translated
    def audit(self, run_id: str) -> list[AuditEntry]:
        """Every tool-policy decision the run's agents met, oldest first."""
        return self.runtime.store.read_audit(run_id)

    @_translated
    def cancel(self, run_id: str, reason: str = "cancelled by a user") -> RunState:
        """Cancel a run: no node starts any more, queued messages are revoked, running
        nodes are told to stop (sandboxed programs are killed) within about a second, and
        a cancelled run never resumes."""
        runtime = self.runtime
        runtime.store.run_status(run_id)
        cancel_run(runtime, self.broker, run_id, reason)
        return runtime.store.read_state(run_id)

    # -- approvals ------------------------------------------------------------------

    @_translated
    def approvals(self, run_id: str | None = None) -> list[Approval]:
        """Approval requests waiting for a person, oldest first (of one run, or all)."""
        if run_id is not None:
            self.runtime.store.run_status(run_id)
        return ApprovalBook(self.runtime).pending(run_id)

    @_translated
    def approve(
        self,
        run_id: str,
        node_id: str,
        *,
        comment: str = "",
        args: dict[str, Any] | None = None,
        by: str | None = None,
    ) -> Approval:
        """Let the waiting node go on; ``args`` replace the proposed arguments (a tool's
        input, or a node's params/instruction/code). ApprovalError if none waits."""
        return self._decide(run_id, node_id, approved=True, comment=comment, args=args, by=by)

    @_translated
    def reject(
        self, run_id: str, node_id: str, *, comment: str = "", by: str | None = None
    ) -> Approval:
        """Refuse the waiting request: a rejected tool call is reported to the agent,
        a rejected node fails (dead letter class ``policy``)."""
        return self._decide(run_id, node_id, approved=False, comment=comment, by=by)

    def _decide(
        self,
        run_id: str,
        node_id: str,
        *,
        approved: bool,
        comment: str,
        by: str | None,
        args: dict[str, Any] | None = None,
    ) -> Approval:
        self.runtime.store.run_status(run_id)
        approval, ready = ApprovalBook(self.runtime).decide(
            run_id,
            node_id,
            approved=approved,
            by=by or getpass.getuser(),
            comment=comment,
            args=args,
        )
        dispatch(self.broker, self.runtime.machine, ready)
        return approval

    # -- schedules ------------------------------------------------------------------

    @_translated
    def add_schedule(
        self,
        name: str,
        *,
        cron: str | None = None,
        every_s: float | None = None,
        timezone: str = "UTC",
        goal: str | None = None,
        plan: Plan | dict[str, Any] | str | Path | None = None,
        worker_types: list[str] | None = None,
        budget: Budget | dict[str, Any] | None = None,
        budget_tokens: int | None = None,
        overlap: Overlap | str = Overlap.SKIP,
        catchup: Catchup | str = Catchup.SKIP,
        max_followups: int = 0,
        followup_depth: int = 1,
        replace: bool = False,
    ) -> Schedule:
        """Start ``goal`` or ``plan`` on a cron expression (in ``timezone``) or every
        ``every_s`` seconds, from the next tick on. Its runs' writers may queue up to
        ``max_followups`` follow-up runs each (``propose_followup``), follow-ups of
        follow-ups up to ``followup_depth`` deep. ScheduleError if anything is invalid
        (nothing is stored then), or if the name is taken and not ``replace``."""
        schedule = parse_schedule(
            {
                "name": name,
                "cron": cron,
                "every_s": every_s,
                "timezone": timezone,
                "goal": goal,
                "plan": _coerce_plan(plan) if plan is not None else None,
                "worker_types": worker_types,
                "budget": requested_budget(budget, budget_tokens),
                "overlap": overlap,
                "catchup": catchup,
                "max_followups": max_followups,
                "followup_depth": followup_depth,
            }
        )
        self._check_schedule(schedule)
        store = schedule_store(self.runtime)
        if not replace and name in store.names():
            raise ScheduleError(f"a schedule {name!r} exists already: remove it, or replace it")
        store.save(schedule)
        sync_entry(self.app, schedule)
        return schedule

    def _check_schedule(self, schedule: Schedule) -> None:
        """What the tick would refuse, refused now: the cron, the plan, the goal."""
        if schedule.cron is not None:
            parse_cron(schedule.cron, schedule.timezone)
        runtime = self.runtime
        if schedule.plan is not None:
            check_plan(schedule.plan, runtime.settings, runtime.registry)
        if schedule.goal is not None:
            plan_request(runtime.settings, runtime.registry, schedule.goal, schedule.options())

    @_translated
    def list_schedules(self) -> list[ScheduleInfo]:
        """Every schedule, with its next fire time and its last fire."""
        return [self._info(schedule, 1) for schedule in schedule_store(self.runtime).all()]

    @_translated
    def get_schedule(self, name: str, *, history: int = 20) -> ScheduleInfo:
        return self._info(schedule_store(self.runtime).get(name), history)

    def _info(self, schedule: Schedule, history: int) -> ScheduleInfo:
        fires = schedule_store(self.runtime).history(schedule.name, history)
        last_run = next((fire.run_id for fire in fires if fire.run_id), "")
        status = None
        if last_run and self.runtime.store.exists(last_run):
            status = self.runtime.store.run_status(last_run)
        return ScheduleInfo(
            schedule=schedule,
            next_fire_at=None if schedule.paused else next_fire_at(self.app, schedule.name),
            history=fires,
            last_run_id=last_run or None,
            last_run_status=status,
        )

    @_translated
    def pause_schedule(self, name: str) -> Schedule:
        """Stop firing (a paused schedule keeps its history; ``resume_schedule`` resumes)."""
        return self._set_paused(name, True)

    @_translated
    def resume_schedule(self, name: str) -> Schedule:
        """Fire again from the next tick (missed ticks follow the catch-up policy)."""
        return self._set_paused(name, False)

    def _set_paused(self, name: str, paused: bool) -> Schedule:
        store = schedule_store(self.runtime)
        schedule = store.get(name).model_copy(update={"paused": paused})
        store.save(schedule)
        sync_entry(self.app, schedule)
        return schedule

    @_translated
    def remove_schedule(self, name: str) -> None:
        schedule_store(self.runtime).delete(name)
        drop_entry(self.app, name)

    @_translated
    def run_schedule_now(self, name: str) -> Fire:
        """Fire the schedule once now, paused or not (its overlap policy still applies)."""
        return fire_schedule(self.runtime, self.broker, name, manual_tick(), manual=True)

    # -- the dead-letter queue ------------------------------------------------------

    @_translated
    def dlq_list(
        self,
        *,
        run_id: str | None = None,
        worker_type: str | None = None,
        classification: Classification | str | None = None,
        status: DeadLetterStatus | str | None = None,
        limit: int = 50,
    ) -> list[DeadLetter]:
        """Dead letters, newest first, filtered by any of run, worker type,
        classification (transient/permanent/budget/policy/timeout/poison) and status."""
        where = dlq_filter(run_id, worker_type, classification, status)
        return dead_letters(self.runtime).find(where, limit=limit)

    @_translated
    def dlq_get(self, entry_id: str) -> DeadLetter:
        """One dead letter (DeadLetterError if there is none)."""
        return dead_letters(self.runtime).get(entry_id)

    @_translated
    def dlq_replay(self, entry_id: str, *, fresh: bool = False) -> ReplayResult:
        """Run a dead letter's node again, re-opening its run: completed nodes are kept,
        and an agent resumes from its checkpoint unless ``fresh``. DeadLetterError if it
        cannot be replayed (replayed already, superseded, its run cancelled or expired)."""
        letter = dead_letters(self.runtime).get(entry_id)
        result = replay(self.runtime, self.broker, letter, fresh=fresh)
        if not result.replayed:
            raise DeadLetterError(f"cannot replay dead letter {entry_id}: {result.reason}")
        return result

    @_translated
    def dlq_replay_all(
        self,
        *,
        run_id: str | None = None,
        worker_type: str | None = None,
        classification: Classification | str | None = None,
        fresh: bool = False,
    ) -> list[ReplayResult]:
        """Replay every pending dead letter that matches (all of them, unfiltered)."""
        where = dlq_filter(run_id, worker_type, classification, None)
        return replay_matching(self.runtime, self.broker, where, fresh=fresh)

    @_translated
    def dlq_purge(self, entry_id: str) -> None:
        """Delete a dead letter (DeadLetterError if there is none)."""
        if not dead_letters(self.runtime).purge(entry_id):
            raise DeadLetterError(f"no dead letter {entry_id!r}")

    @_translated
    def dlq_purge_all(
        self,
        *,
        run_id: str | None = None,
        worker_type: str | None = None,
        classification: Classification | str | None = None,
        status: DeadLetterStatus | str | None = None,
    ) -> int:
        """Delete every dead letter that matches; how many were deleted."""
        store = dead_letters(self.runtime)
        where = dlq_filter(run_id, worker_type, classification, status)
        return sum(store.purge(letter.id) for letter in list(store.scan(where)))

    @_translated
    def dlq_stats(self) -> DeadLetterStats:
        return dead_letters(self.runtime).stats()

    @_translated
    def list_runs(self, limit: int = 20) -> list[RunState]:
        """The most recent runs, newest first, as summaries (no nodes)."""
        store = self.runtime.store
        return [
            store.read_state(run_id, include_nodes=False)
            for run_id in store.list_runs(limit)
            if store.exists(run_id)
        ]


@dataclass(frozen=True)
class ScheduleInfo:
    """A schedule with what it did and will do."""

    schedule: Schedule
    next_fire_at: datetime | None
    history: list[Fire]  # newest first
    last_run_id: str | None
    last_run_status: RunStatus | None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.schedule.model_dump(mode="json", exclude_none=True),
            "next_fire_at": self.next_fire_at.isoformat() if self.next_fire_at else None,
            "last_run_id": self.last_run_id,
            "last_run_status": self.last_run_status.value if self.last_run_status else None,
            "history": [fire.to_json() for fire in self.history],
        }


@dataclass(frozen=True)
class PlannedGoal:
    """A plan made for a goal without running it, and what planning it cost."""

    plan: Plan
    usage: Usage


def plan_goal(
    goal: str, settings: Settings | None = None, options: GoalOptions | None = None
) -> PlannedGoal:
    """Ask the planner for a plan, in this process, without Redis and without a run: what
    ``dagwright plan`` shows. Raises InputError or PlanningFailedError."""
    settings = settings or Settings()
    load_plugins(settings.imports)
    request = plan_request(settings, default_registry, goal, options or GoalOptions())
    plan, usage = plan_locally(settings, request)
    return PlannedGoal(plan=plan, usage=usage)


def dlq_filter(
    run_id: str | None,
    worker_type: str | None,
    classification: Classification | str | None,
    status: DeadLetterStatus | str | None,
) -> DeadLetterFilter:
    """A filter from loose arguments; InputError naming the accepted values if one is off."""
    try:
        return DeadLetterFilter(
            run_id=run_id,
            worker_type=worker_type,
            classification=Classification(classification) if classification else None,
            status=DeadLetterStatus(status) if status else None,
        )
    except ValueError:
        classes = ", ".join(Classification)
        statuses = ", ".join(DeadLetterStatus)
        raise InputError(
            f"unknown classification {classification!r} or status {status!r}: "
            f"classifications are {classes}; statuses are {statuses}"
        ) from None


FINAL_RUN_EVENTS = frozenset(f"run.{status.value}" for status in RunStatus if status.is_final)


def result_of(state: RunState) -> Any:
    """The result of a final run, or the typed error saying why there is none."""
    if state.status == RunStatus.SUCCEEDED:
        return state.result
    if state.status == RunStatus.CANCELLED:
        why = f": {state.reason}" if state.reason else ""
        raise RunCancelledError(f"run {state.run_id} was cancelled{why}", run_id=state.run_id)
    if state.status == RunStatus.FAILED:
        raise RunFailedError(describe_failure(state), run_id=state.run_id)
    raise RunNotFinishedError(
        f"run {state.run_id} is still {state.status.value}", run_id=state.run_id
    )


def describe_failure(state: RunState) -> str:
    if state.reason:  # stopped by its run timeout
        return f"run {state.run_id} failed: {state.reason}"
    failed = state.failed_nodes()
    if not failed:
        return f"run {state.run_id} failed"
    node_id, node = next(iter(failed.items()))
    error = node.error
    reason = f"{error.error_class}: {error.message}" if error else "no error recorded"
    more = f" (and {len(failed) - 1} more failed node(s))" if len(failed) > 1 else ""
    return f"run {state.run_id} failed: node {node_id!r} ({node.type}) {reason}{more}"


class RunHandle:
    """One run: ``status()``, ``wait()``, ``result()``, ``events()``, ``cancel()``."""

    def __init__(self, client: Client, run_id: str) -> None:
        self.client = client
        self.run_id = run_id

    def __repr__(self) -> str:
        return f"RunHandle({self.run_id!r})"

    def status(self) -> RunState:
        return self.client.status(self.run_id)

    def wait(
        self, timeout: float | None = None, *, on_progress: ProgressCallback | None = None
    ) -> RunState:
        return self.client.wait(self.run_id, timeout, on_progress=on_progress)

    def result(self, timeout: float | None = None) -> Any:
        return self.client.result(self.run_id, timeout)

    def events(self, *, follow: bool = True, after: str = "0") -> Iterator[Event]:
        return self.client.events(self.run_id, follow=follow, after=after)

    def cancel(self, reason: str = "cancelled by a user") -> RunState:
        return self.client.cancel(self.run_id, reason)


def _coerce_plan(plan: Plan | dict[str, Any] | str | Path) -> Plan:
    if isinstance(plan, Plan):
        return plan
    if isinstance(plan, dict):
        return parse_plan(plan)
    return load_plan(plan)
