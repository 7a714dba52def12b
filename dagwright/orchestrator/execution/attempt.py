"""Running one node: claim it, run its worker type under a lease, record the outcome.

Plain functions over a ``Runtime``; the Celery task in ``dagwright.tasks`` only unpacks
its message and calls ``execute_node``.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import logging
import os
import random
import socket
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any

from dagwright.dlq import Classification, classify
from dagwright.errors import (
    BatchWaitExpiredError,
    BreakerOpenError,
    BreakerWaitExpiredError,
    LLMBatchPendingError,
    NodeLostError,
    NodeTimeoutError,
    PermanentError,
    RateLimitWaitExpiredError,
    RetryableError,
    TeamTaskFailedError,
    TeamTaskPendingError,
)
from dagwright.models import ErrorInfo, Node, RetryPolicy
from dagwright.orchestrator.broker import Broker
from dagwright.orchestrator.control.approvals import ApprovalBook, approved_node
from dagwright.orchestrator.control.pulling import PullingSlots, QueueBacklog
from dagwright.orchestrator.execution.backoff import compute_backoff
from dagwright.orchestrator.execution.eager import AheadNode, EagerSlot, HeldNode
from dagwright.orchestrator.execution.expansion import (
    Expansion,
    apply_expansion,
    prepare_expansion,
)
from dagwright.orchestrator.execution.fairness import (
    Turn,
    WaitingMessages,
    handed_over,
    next_turn,
    others_wait,
)
from dagwright.orchestrator.execution.leases import LeaseKeeper
from dagwright.orchestrator.execution.limits import (
    Limit,
    NodeLimits,
    Slots,
    node_limits,
    publish_waiters,
)
from dagwright.orchestrator.execution.poison import refused_delivery
from dagwright.orchestrator.execution.pool import dispatch_or_pool, release_rest
from dagwright.orchestrator.execution.rates import RateWait, RateWindows, node_rates
from dagwright.orchestrator.execution.replanning import replanner_for
from dagwright.orchestrator.runstate.machine import (
    AHEAD_FENCE,
    Advance,
    AheadLink,
    BreakerWait,
    Claim,
    Held,
    LeaseRef,
    ReadyNode,
    RunOn,
    Success,
)
from dagwright.orchestrator.runtime import Runtime
from dagwright.planning.planner import PLANNER_TYPE
from dagwright.plans.mapping import (
    child_inputs,
    children_of,
    is_join,
    items_of,
    joined_output,
)
from dagwright.redaction import known_secrets, redact
from dagwright.settings import Settings
from dagwright.shown_ids import shown_id
from dagwright.stackfile import process_alive
from dagwright.telemetry.counters import NodeDuration
from dagwright.telemetry.node_logs import AttemptLog, capturing, flush_current
from dagwright.workers import NodeContext, NodeServices
from dagwright.workers.function_worker import FUNCTION_TYPE
from dagwright.workers.proposals import ApprovalNeeded, Proposal
from dagwright.workers.team_tasks import give_up_waiting

log = logging.getLogger(__name__)

MAX_TRACEBACK_CHARS = 8000
# A parked node is woken by its limit; the stranded rule is only a late safety net for it.
PARKED_RECHECK_FACTOR = 10
BREAKER_WAIT_JITTER_S = 1.0  # spreads the nodes a breaker held back over its first second


class Outcome(enum.StrEnum):
    SUCCEEDED = "succeeded"
    RETRYING = "retrying"
    FAILED = "failed"
    STALE = "stale"  # a duplicate or superseded message: nothing was recorded
    WAITING = "waiting_approval"  # parked until a person decides; the worker slot is free
    PARKED = "parked"  # a concurrency limit is full: queued again, waiting for a slot


# The outcomes after which a worker pulls from the run's pool itself (a success pulls
# as it is recorded; a stale attempt freed nothing, a parked one's siblings would park).
PULLS_AFTER = frozenset({Outcome.FAILED, Outcome.RETRYING, Outcome.WAITING})
# Not in the node-duration metric: a stale attempt recorded nothing, a parked one ran
# nothing (a timeout is counted when it is recorded, as TIMEOUT_OUTCOME); a success is
# counted by the step that records it (record_success), at no extra round trip.
UNMEASURED_OUTCOMES = frozenset({Outcome.STALE, Outcome.PARKED})
COUNTED_WHEN_RECORDED = frozenset({Outcome.SUCCEEDED})
TIMEOUT_OUTCOME = "timeout"
# The time limit a link run ahead may have when it is claimed (claim_ahead): it runs
# already, its own timeout bounding it, so the message's time left does not.
CLAIMED_LINK_LIMIT_S = 1e9


@dataclass
class ExecutionEnv:
    runtime: Runtime
    broker: Broker
    leases: LeaseKeeper
    services: NodeServices
    limits: NodeLimits | None = None  # None: concurrency limits are not enforced

    @property
    def holder(self) -> str:
        return process_holder(os.getpid())

    @functools.cached_property
    def pulling(self) -> PullingSlots:
        """The worker slots pulling from each queue (pool.py), read every few seconds."""
        return PullingSlots(self.runtime)

    @functools.cached_property
    def fair(self) -> bool:
        """Whether a worker gives its turn away while other messages wait (fairness.py)."""
        return self.runtime.settings.dispatch.fair_dispatch

    @functools.cached_property
    def waiting(self) -> WaitingMessages:
        """Whose messages wait in this worker's queues (fairness.py), read at most every
        10 ms."""
        return WaitingMessages(self.broker, self.runtime.store.running_nodes)

    @functools.cached_property
    def rates(self) -> RateWindows:
        """The rate limits' script (rates.py), loaded once per process."""
        return RateWindows(self.runtime)

    @functools.cached_property
    def backlog(self) -> QueueBacklog:
        """The messages waiting in each queue (pool.py), read at most every 0.1 s."""
        return QueueBacklog(self.broker)


@functools.cache
def process_holder(pid: int) -> str:
    """``<host>:<pid>``, the holder a claim records (asked of the system once per process:
    a fork has a pid of its own, hence the argument)."""
    return f"{socket.gethostname()}:{pid}"


def execute_node(
    env: ExecutionEnv, run_id: str, node_id: str, fence: int, eager: EagerSlot | None = None
) -> Outcome:
    """Run the node a message names; then, one after another, each node a success readied
    that ``eager`` kept for this worker to run itself (see ``eager.py``). Returns the
    outcome of the named node."""
    try:
        outcome = attempt_node(env, run_id, node_id, fence, eager)
        pull_after(env, run_id, outcome, eager)
        while eager is not None and (held := next_held(env, eager)) is not None:
            if isinstance(held, AheadNode):
                run_ahead(env, held, eager)
            else:
                run_held(env, held, eager)
        return outcome
    finally:
        if eager is not None:
            let_go_of_held(env, eager)


def next_held(env: ExecutionEnv, eager: EagerSlot) -> HeldNode | AheadNode | None:
    """The next node this worker runs itself (a chain's link to run ahead last); with
    none left, the successes it still holds are recorded, which may claim the next batch."""
    held: HeldNode | AheadNode | None = eager.take() or eager.take_ahead()
    if held is None and eager.pending:
        run_id = eager.pending_run
        record_successes(env, run_id, eager.take_pending(run_id), eager)
        held = eager.take()
    return held


def run_held(env: ExecutionEnv, held: HeldNode, eager: EagerSlot) -> None:
    """Run a node this worker kept (claimed for it already, or to claim now)."""
    kept = held.node
    if held.lost.is_set():  # a batch's node whose lease went while it waited
        log.info("%s/%s was taken away before it started", kept.run_id, kept.node_id)
        return
    log.debug("running %s/%s eagerly (fence %d)", kept.run_id, kept.node_id, kept.fence)
    # a batch's node waited for those before it: its attempt starts now
    claimed = dataclasses.replace(held.claim, claimed_at=time.monotonic()) if held.claim else None
    started_at, started = time.time(), time.monotonic()
    ran = attempt_node(env, kept.run_id, kept.node_id, kept.fence, eager, claimed)
    pull_after(env, kept.run_id, ran, eager)
    if ran not in UNMEASURED_OUTCOMES:  # a stale or parked node ran nothing to show
        eager.record(kept, ran.value, started_at, time.monotonic() - started)


def may_run_ahead(env: ExecutionEnv, run_id: str, link: AheadLink, head: Claim) -> bool:
    """Whether a chain's ``link`` may run ahead of its claim: a function node (the quick
    kind: an agent's node takes seconds, a sandbox's or a team task's start alone more
    than a batch's window) with nothing between its claim and its run (an approval, a
    rate, a concurrency slot), none of dagwright's own steps (a map's): complete.lua has
    checked the rest."""
    node = link.node
    if node.type != FUNCTION_TYPE or node.map is not None or node.approval == "required":
        return False
    if node_rates(env.runtime, node):
        return False
    settings, run_max = env.runtime.settings, head.run_max_concurrent
    return (
        env.limits is None
        or node_limits(settings, run_id, node.id, AHEAD_FENCE, node.type, run_max, node.concurrency)
        is None
    )


@dataclass
class AheadAttempt:
    """A link running ahead, which the lease keeper's thread claims (``promote``) if it
    is still running when the successes held before it are due, or at its timeout: from
    then on it shows as running, under a lease, and ends as any claimed node."""

    started: float  # time.monotonic() at its start: its claim's claimed_at, for the metric
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    returned: bool = False  # its function returned (or raised): no promotion any more
    promoted: bool = False  # claimed meanwhile, or found to be no longer this worker's
    claim: Claim | None = None  # its claim, once promoted (None: no longer this worker's)
    advance: Advance | None = None  # what the claiming step changed, for the worker to go on


def run_ahead(env: ExecutionEnv, ahead: AheadNode, eager: EagerSlot) -> None:
    """Run a chain's link before the success before it is recorded (eager.py)."""
    parent = eager.pending[-1]
    claim = ahead.head.ahead_of(ahead.link, parent)
    ctx = node_context(env, ahead.run_id, claim.node.id, AHEAD_FENCE, claim)
    log.debug("running %s/%s ahead of its claim", ahead.run_id, claim.node.id)
    started_at, started = time.time(), time.monotonic()
    with capturing(attempt_log(env.runtime, ctx)):
        ran = run_linked(env, ctx, claim, eager)
    if ran not in UNMEASURED_OUTCOMES:  # under its claim's fence if it was claimed meanwhile
        shown = dataclasses.replace(ahead.node, fence=ctx.fence)
        eager.record(shown, ran.value, started_at, time.monotonic() - started)


def run_linked(env: ExecutionEnv, ctx: NodeContext, claim: Claim, eager: EagerSlot) -> Outcome:
    """A link's attempt: a success is held, or recorded with those before it; a link still
    running when they are due (or at its timeout) is claimed meanwhile, and any outcome
    but a success claims it first (``claim_ahead``): it is then recorded as any node's."""
    timeout_s = claim.node.timeout_s or env.runtime.settings.limits.default_timeout_s
    now = time.monotonic()
    deadline = now + timeout_s
    due = min(deadline, eager.pending_since + eager.window_s)
    attempt = AheadAttempt(claim.claimed_at)
    ctx.claim_first = lambda: promote(env, ctx, eager, attempt, deadline, timeout_s)
    raised: Exception | None = None
    output_json = ""
    with env.leases.hold(
        LeaseRef(ctx.run_id, ctx.node_id, AHEAD_FENCE),
        ctx.stop,
        timeout_s=max(0.0, due - now),
        on_timeout=ctx.claim_first,
        renewed=False,
        stops=False,
    ):
        try:
            output = run_worker(env.runtime, ctx, claim.node)
            output_json = encode_output(output, env.runtime.settings.limits.max_output_bytes)
        except Exception as exc:
            raised = exc
    with attempt.lock:
        attempt.returned = True
        ctx.claim_first = None
    if not attempt.promoted:
        if raised is None:
            return record_success(env, ctx, claim, output_json, eager=eager)
        if ctx.stop.is_set():  # its run was stopped: not claimed
            return stopped(env, ctx, raised)
        attempt.claim, attempt.advance = claim_ahead(env, ctx, eager, attempt.started)
    return end_claimed_link(env, ctx, attempt, eager, raised, output_json)


def promote(
    env: ExecutionEnv,
    ctx: NodeContext,
    eager: EagerSlot,
    attempt: AheadAttempt,
    deadline: float,
    timeout_s: float,
) -> None:
    """Claim a link while it runs: from the keeper's thread when the successes held before
    it are due, or at its timeout; from its own when it is about to write something fenced
    by its claim (``NodeContext.claim_first``). The successes held before it are recorded,
    and it shows as running, under a lease the keeper renews until its ``deadline``, where
    its timeout is recorded as any node's. The worker's thread waits for this to end
    before it looks at the slot again (``attempt.lock``)."""
    with attempt.lock:
        if attempt.returned or attempt.promoted:
            return
        attempt.promoted = True
        ctx.claim_first = None
        try:
            attempt.claim, attempt.advance = claim_ahead(env, ctx, eager, attempt.started)
        except Exception:
            log.warning("claiming %s/%s, run ahead, failed", ctx.run_id, ctx.node_id, exc_info=True)
        claimed = attempt.claim
        if claimed is None:
            ctx.stop.set()  # its outcome would be dropped: the held ones run again
            return
        env.leases.keep(
            LeaseRef(ctx.run_id, ctx.node_id, ctx.fence),
            ctx.stop,
            deadline=deadline,
            on_timeout=lambda: record_timeout(env, ctx, claimed, timeout_s),
        )
        log.info("%s/%s, run ahead, is claimed while it runs", ctx.run_id, ctx.node_id)


def end_claimed_link(
    env: ExecutionEnv,
    ctx: NodeContext,
    attempt: AheadAttempt,
    eager: EagerSlot,
    raised: Exception | None,
    output_json: str,
) -> Outcome:
    """Record the outcome of a link claimed after it started, as ``run_claimed`` records a
    node's, once the worker has gone on from the step that claimed it."""
    claimed = attempt.claim
    if claimed is not None:
        env.leases.let_go([LeaseRef(ctx.run_id, ctx.node_id, ctx.fence)])
    if attempt.advance is not None:
        go_on(env, ctx.run_id, attempt.advance, eager)
    if claimed is None:
        log.info("%s/%s ran ahead and is no longer this worker's", ctx.run_id, ctx.node_id)
        return Outcome.STALE
    if raised is None:
        return record_success(env, ctx, claimed, output_json, eager=eager)
    outcome = record_raised(env, ctx, claimed, raised)
    if outcome not in UNMEASURED_OUTCOMES:
        observe_attempt(env, claimed, outcome.value)
    return outcome


def claim_ahead(
    env: ExecutionEnv, ctx: NodeContext, eager: EagerSlot, started: float
) -> tuple[Claim | None, Advance | None]:
    """Claim a link run ahead since ``started``: the successes held before it are recorded
    in the step that claims it for this worker, which ``ctx`` then names; returns its
    claim (None if the step did not claim it: its run stopped, a success before it was no
    longer this worker's) and what else the step changed (None: nothing was recorded)."""
    run_id = ctx.run_id
    successes = eager.take_pending(run_id)
    eager.drop_ahead()
    try:
        advance = env.runtime.machine.complete_many(
            run_id,
            successes,
            pull_from=sorted(eager.queues),
            run_on=RunOn(env.holder, env.runtime.settings.dispatch.lease_s, CLAIMED_LINK_LIMIT_S),
        )
    finally:  # recorded, or left to their leases
        env.leases.let_go([success.lease(run_id) for success in successes])
    if advance is None:
        return None, None
    mine = [pair for pair in advance.claimed if pair[0].node_id == ctx.node_id]
    rest = dataclasses.replace(advance, claimed=tuple(p for p in advance.claimed if p not in mine))
    if not mine:
        return None, rest
    row, claimed = mine[0]
    ctx.fence, ctx.attempt = row.fence, claimed.attempt
    return dataclasses.replace(claimed, claimed_at=started), rest


def let_go_of_held(env: ExecutionEnv, eager: EagerSlot) -> None:
    """What an attempt that raised left held: its leases expire, and the reconciler
    delivers those nodes again (their successes held were not recorded)."""
    leases = [held.node.lease for held in eager.held]
    leases += [success.lease(eager.pending_run) for success in eager.pending]
    if leases:
        log.warning("%d node(s) held by this worker are left to their leases", len(leases))
    eager.held.clear()
    eager.drop_ahead()
    eager.take_pending(eager.pending_run)
    env.leases.let_go(leases)


def pull_after(env: ExecutionEnv, run_id: str, outcome: Outcome, eager: EagerSlot | None) -> None:
    """A success pulls from its run's pool in the step that records it (complete.lua);
    an attempt that freed this worker otherwise pulls here, so a pooled fan-out whose
    nodes fail keeps its workers (pool.py)."""
    if eager is None or eager.kept is not None or outcome not in PULLS_AFTER:
        return
    dispatch_readied(env, env.runtime.machine.pull(run_id, sorted(eager.queues)), eager)


def attempt_node(
    env: ExecutionEnv,
    run_id: str,
    node_id: str,
    fence: int,
    eager: EagerSlot | None,
    claimed: Claim | None = None,
) -> Outcome:
    """Claim the node (unless the step that readied it ``claimed`` it for this worker)
    and run the attempt."""
    claim = claimed or claim_node(env, run_id, node_id, fence)
    if claim is None:
        shown = f"{shown_id(run_id)}/{shown_id(node_id)}"  # a message may be forged
        log.info("dropping stale message for %s (fence %d)", shown, fence)
        return Outcome.STALE
    ctx = node_context(env, run_id, node_id, fence, claim)
    with capturing(attempt_log(env.runtime, ctx)):
        return run_attempt(env, ctx, claim, eager)


def node_context(
    env: ExecutionEnv, run_id: str, node_id: str, fence: int, claim: Claim
) -> NodeContext:
    """What the node's worker type runs with, from its claim."""
    return NodeContext(
        run_id=run_id,
        node_id=node_id,
        attempt=claim.attempt,
        fence=fence,
        settings=env.runtime.settings,
        inputs=claim.inputs,
        services=env.services,
        last_checkpoint=claim.checkpoint,
        response_cache=claim.run_response_cache,
        llm_batch=claim.run_llm_batch,
        run_inputs=claim.run_inputs,
    )


def run_attempt(
    env: ExecutionEnv, ctx: NodeContext, claim: Claim, eager: EagerSlot | None
) -> Outcome:
    """The claimed attempt: a map's step, or the node's worker within its limits."""
    mapped = claim.node.map
    if mapped is not None and mapped.index is None:
        return map_step(env, ctx, claim, eager)
    if mapped is not None:  # a map's child: its item is its input from map.over
        ctx.inputs = child_inputs(claim.node, claim.inputs)
    outcome = run_within_limits(env, ctx, claim, eager)
    if outcome not in UNMEASURED_OUTCOMES | COUNTED_WHEN_RECORDED:
        observe_attempt(env, claim, outcome.value)
    return outcome


def attempt_log(runtime: Runtime, ctx: NodeContext) -> AttemptLog | None:
    """Where the attempt's prints and logs go (telemetry/node_logs.py); None when node
    logs are off (``node_log_max_bytes`` 0)."""
    limits = runtime.log_limits
    if not limits.max_bytes:
        return None
    append = functools.partial(runtime.node_logs.append, ctx.run_id)
    return AttemptLog(ctx.run_id, ctx.node_id, ctx.attempt, limits, append)


def map_step(env: ExecutionEnv, ctx: NodeContext, claim: Claim, eager: EagerSlot | None) -> Outcome:
    """A mapped node's first claim spawns its children; its claim after they ended joins
    their outputs (plans/mapping.py). Neither runs its worker type nor takes a slot."""
    node = claim.node
    try:
        if is_join(node, claim.inputs):
            joined = joined_output(node, claim.inputs)
            output = encode_output(joined, env.runtime.settings.limits.max_output_bytes)
            return record_success(env, ctx, claim, output, eager=eager)
        items = items_of(node, claim.inputs, env.runtime.settings.limits.map_max_items)
        children = children_of(node, items)
    except PermanentError as exc:
        return record_failure(env, ctx, claim, exc)
    over = node.map.over if node.map else ""
    advance = env.runtime.machine.spawn(ctx.run_id, node.id, ctx.fence, children, over)
    if advance is None:
        return Outcome.STALE
    log.info("%s/%s mapped over %d items", ctx.run_id, node.id, len(items))
    dispatch_readied(env, advance.ready, eager)
    if advance.run_finished is not None:
        env.runtime.forget_active(ctx.run_id)
    return Outcome.SUCCEEDED


def run_within_limits(
    env: ExecutionEnv, ctx: NodeContext, claim: Claim, eager: EagerSlot | None = None
) -> Outcome:
    """Run the claimed node if its concurrency slots are free, else park it."""
    refused = refused_delivery(env.runtime.settings, claim)
    if refused is not None:
        return record_failure(env, ctx, claim, refused)
    rates = node_rates(env.runtime, claim.node)
    if rates:  # before the slots: a node waiting for its rate holds none
        over = env.rates.take(rates, f"{ctx.run_id}/{ctx.node_id}@{ctx.fence}")
        if over is not None:
            return wait_for_rate(env, ctx, claim, over)
    limits = env.limits
    slots = slots_for(env.runtime.settings, claim, ctx) if limits else None
    if limits is None or slots is None:  # no limit applies: no round trip
        return run_claimed(env, ctx, claim, eager)
    taking = limits.take(slots)
    if taking.woken:  # on a Cluster: slots it held a moment before a later limit refused
        publish_waiters(env.runtime, env.broker, limits, list(taking.woken))
    if taking.waits_for is not None:
        waits_for = taking.waits_for
        return park(env, limits, ctx, next(lim for lim in slots.limits if lim.name == waits_for))
    try:
        return run_claimed(env, ctx, claim, eager)
    finally:
        free_slots(env, limits, slots)


def run_claimed(
    env: ExecutionEnv, ctx: NodeContext, claim: Claim, eager: EagerSlot | None = None
) -> Outcome:
    """Run the claimed node's worker under its lease and record the outcome."""
    run_id, node_id = ctx.run_id, ctx.node_id
    timeout_s = claim.node.timeout_s or env.runtime.settings.limits.default_timeout_s
    with env.leases.hold(
        LeaseRef(run_id, node_id, ctx.fence),
        ctx.stop,
        timeout_s=timeout_s,
        on_timeout=lambda: record_timeout(env, ctx, claim, timeout_s),
    ):
        try:
            output = run_worker(env.runtime, ctx, approved_node(ctx, claim.node))
            output_json = encode_output(output, env.runtime.settings.limits.max_output_bytes)
            expansion = (
                prepare_expansion(env.runtime, ctx, claim.node, output)
                if claim.node.type == PLANNER_TYPE
                else None
            )
        except Exception as exc:
            return record_raised(env, ctx, claim, exc)
    return record_success(env, ctx, claim, output_json, expansion, eager)


def record_raised(env: ExecutionEnv, ctx: NodeContext, claim: Claim, exc: Exception) -> Outcome:
    """Record what a claimed node's worker raised: a wait for a person's approval, or a
    failure; nothing if the node was taken away or stopped meanwhile."""
    if isinstance(exc, NodeLostError):
        log.info("%s/%s was taken from this worker; stopping it", ctx.run_id, ctx.node_id)
        return Outcome.STALE
    if isinstance(exc, ApprovalNeeded):
        return wait_for_approval(env, ctx, claim, exc.proposal)
    if ctx.stop.is_set():
        return stopped(env, ctx, exc)
    return record_failure(env, ctx, claim, exc)


def stopped(env: ExecutionEnv, ctx: NodeContext, exc: Exception) -> Outcome:
    """A node that raised once told to stop (cancelled, timed out and recorded, or lost):
    nothing is recorded."""
    message = redact(str(exc), known_secrets(env.runtime.settings))
    log.info("%s/%s stopped (%s: %s)", ctx.run_id, ctx.node_id, type(exc).__name__, message)
    return Outcome.STALE


def slots_for(settings: Settings, claim: Claim, ctx: NodeContext) -> Slots | None:
    """The concurrency slots the claimed node must hold to run (None: no limit applies)."""
    return node_limits(
        settings,
        ctx.run_id,
        ctx.node_id,
        ctx.fence,
        claim.node.type,
        claim.run_max_concurrent,
        claim.node.concurrency,
    )


def park(env: ExecutionEnv, limits: NodeLimits, ctx: NodeContext, limit: Limit) -> Outcome:
    """The node waits for a slot of ``limit``: queued again, its attempt given back. A
    slot freed between the refusal and the park wakes it at once."""
    recheck_s = PARKED_RECHECK_FACTOR * env.runtime.settings.dispatch.stranded_after_s
    parked = env.runtime.machine.park(
        ctx.run_id, ctx.node_id, ctx.fence, limit=limit.name, recheck_s=recheck_s
    )
    if not parked:
        return Outcome.STALE
    log.info("node %s/%s waits for a slot of %s", ctx.run_id, ctx.node_id, limit.name)
    publish_waiters(env.runtime, env.broker, limits, limits.wake([limit]))
    return Outcome.PARKED


def free_slots(env: ExecutionEnv, limits: NodeLimits, slots: Slots) -> None:
    """After the outcome is recorded (whatever it was): free the slots, wake who fits."""
    try:
        publish_waiters(env.runtime, env.broker, limits, limits.release(slots))
    except Exception:  # the slots expire, and the reconciler wakes the waiters
        log.warning("releasing the slots of %s failed", slots.holder, exc_info=True)


def claim_node(env: ExecutionEnv, run_id: str, node_id: str, fence: int) -> Claim | None:
    """Claim the node; take it over if the process holding it is a dead one on this host
    (its message was redelivered after the worker process was killed)."""
    runtime = env.runtime
    lease_s = runtime.settings.dispatch.lease_s
    claim = runtime.machine.claim(run_id, node_id, fence, lease_s=lease_s, holder=env.holder)
    if isinstance(claim, Held) and holder_is_dead_here(claim.holder):
        claim = runtime.machine.claim(
            run_id, node_id, fence, lease_s=lease_s, holder=env.holder, takeover=claim.holder
        )
    return claim if isinstance(claim, Claim) else None


def holder_is_dead_here(holder: str) -> bool:
    host, _, pid = holder.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    return not process_alive(int(pid))


def run_worker(runtime: Runtime, ctx: NodeContext, node: Node) -> Any:
    try:
        worker_type = runtime.registry.get(node.type)
    except KeyError as exc:
        raise PermanentError(
            f"worker type {node.type!r} is not registered in this worker; start it with "
            "--import naming the module that registers it"
        ) from exc
    return worker_type.run(ctx, node)


def wait_for_approval(
    env: ExecutionEnv, ctx: NodeContext, claim: Claim, proposal: Proposal
) -> Outcome:
    """Park the node until a person decides; this worker moves on to other work."""
    timeout_s = claim.node.approval_timeout_s or env.runtime.settings.limits.approval_timeout_s
    if not ApprovalBook(env.runtime).request(ctx, proposal, timeout_s):
        return Outcome.STALE
    log.info(
        "%s/%s waits for approval of %s (`dagwright approvals list`)",
        ctx.run_id,
        ctx.node_id,
        proposal.action,
    )
    return Outcome.WAITING


def encode_output(output: Any, max_bytes: int) -> str:
    try:
        encoded = json.dumps(output, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise PermanentError(f"the node's output is not JSON: {exc}") from exc
    if len(encoded) > max_bytes:
        raise PermanentError(
            f"the node's output is {len(encoded)} bytes; the limit is {max_bytes} "
            "(DAGWRIGHT_MAX_OUTPUT_BYTES): write big data elsewhere and return a reference"
        )
    return encoded


def record_success(
    env: ExecutionEnv,
    ctx: NodeContext,
    claim: Claim,
    output_json: str,
    expansion: Expansion | None = None,
    eager: EagerSlot | None = None,
) -> Outcome:
    """Record the output and count the attempt; a planner's output also adds its plan's
    nodes to the run. Of the nodes this readied, ``eager`` may keep one for this worker
    to run next; the others are published. In a batch of a fan-out's quick nodes
    (eager.py), the success may be held to be recorded with the next ones."""
    flush_current()  # the node's lines are in before its end is: a reader sees them all
    if expansion is not None:
        advance = apply_expansion(env.runtime, ctx, expansion)
        if advance is None:
            return Outcome.STALE
        observe_attempt(env, claim, Outcome.SUCCEEDED.value)
        go_on(env, ctx.run_id, advance, eager)
        return Outcome.SUCCEEDED
    duration = attempt_duration(claim, Outcome.SUCCEEDED.value)
    success = Success(ctx.node_id, ctx.fence, output_json, duration)
    if eager is not None and eager.holds_success(ctx.run_id, success):
        if ctx.fence != AHEAD_FENCE:  # a link run ahead has no lease: the first held has
            env.leases.keep(success.lease(ctx.run_id), threading.Event())
        return Outcome.SUCCEEDED
    held = eager.take_pending(ctx.run_id) if eager is not None else []
    advance = record_successes(env, ctx.run_id, [*held, success], eager)
    if advance is None or ctx.node_id in advance.stale:
        return Outcome.STALE
    return Outcome.SUCCEEDED


def record_successes(
    env: ExecutionEnv, run_id: str, successes: list[Success], eager: EagerSlot | None
) -> Advance | None:
    """Record ``successes`` of one run in one step (the last one's node ran last) and go
    on from what it changed; None if none of them was this worker's any more."""
    if eager is not None:
        eager.drop_ahead()  # the step readies, or claims, what comes next
    try:
        advance = env.runtime.machine.complete_many(
            run_id,
            successes,
            # a worker still holding nodes to run pulls none
            pull_from=sorted(eager.queues) if eager is not None and not eager.held else (),
            run_on=run_on(env, run_id, eager),
            holder=env.holder,
        )
    finally:  # recorded, or left to their leases (taken from the slot: nobody else lets go)
        env.leases.let_go([success.lease(run_id) for success in successes])
    if advance is None:
        return None
    for node_id in sorted(advance.stale):
        log.info("%s/%s was no longer this worker's: its output is dropped", run_id, node_id)
    go_on(env, run_id, advance, eager)
    return advance


def go_on(env: ExecutionEnv, run_id: str, advance: Advance, eager: EagerSlot | None) -> None:
    """After a success is recorded: keep what this worker runs next, dispatch the rest,
    release the rest of a big fan-out, forget a run that ended."""
    if advance.claimed and eager is not None:
        runs_ahead = functools.partial(may_run_ahead, env)
        for held in eager.keep_claimed(advance.claimed, runs_ahead):
            env.leases.keep(held.node.lease, held.lost)
    turn = Turn.KEEP
    if eager is not None and env.fair:
        turn = next_turn(eager, run_id, advance, env.waiting)
    if turn is Turn.KEEP:
        pooled = dispatch_readied(env, advance.ready, eager)
    else:  # fairness.py: the worker's turn is over
        pooled = dispatch_readied(env, handed_over(advance), None)
    finished = advance.run_finished
    # A big fan-out released in chunks: its pullers release the next chunk as they drain
    # the pool (prelude.lua pull_from_pool); with nothing pooled, this worker does.
    if advance.settling and finished is None and not pooled:
        kept = eager.kept if eager is not None and turn is Turn.KEEP else None
        finished = release_rest(env.broker, env.runtime.machine, env.pulling, run_id, kept)
    if finished is not None:
        env.runtime.forget_active(run_id)


def run_on(env: ExecutionEnv, run_id: str, eager: EagerSlot | None) -> RunOn | None:
    """The terms on which the step recording a success claims the nodes this worker runs
    next (eager.py): only with the slot free, and when the worker would keep its turn
    whatever the step readies (no other run's message waits: fairness.py)."""
    if eager is None or eager.kept is not None:
        return None
    if env.fair and others_wait(eager, run_id, env.waiting):
        return None
    lease_s = env.runtime.settings.dispatch.lease_s
    return RunOn(
        env.holder, lease_s, eager.max_time_limit_s(), eager.batch(), eager.asks_links(run_id)
    )


def record_failure(
    env: ExecutionEnv, ctx: NodeContext, claim: Claim, exc: BaseException
) -> Outcome:
    runtime = env.runtime
    error = describe_error(exc, known_secrets(runtime.settings))
    if isinstance(exc, BreakerOpenError):
        return wait_for_breaker(env, ctx, claim, exc, error)
    if isinstance(exc, LLMBatchPendingError):
        return wait_for_batch(env, ctx, claim, exc, error)
    if isinstance(exc, TeamTaskPendingError):
        return wait_for_team_task(env, ctx, claim, exc, error)
    policy = claim.node.retry or default_retry(runtime, claim.node.type)
    retryable = error.retryable and error.error_class not in policy.non_retryable
    retry = retryable and claim.attempt < policy.max_attempts
    log.warning(
        "node %s/%s attempt %d failed (%s: %s)%s",
        ctx.run_id,
        ctx.node_id,
        claim.attempt,
        error.error_class,
        error.message,
        "; will retry" if retry else "",
    )
    flush_current()
    if retry:
        # An API that said when to come back (retry-after) is not asked sooner.
        delay = max(compute_backoff(policy, claim.attempt), getattr(exc, "retry_after_s", 0) or 0)
        scheduled = runtime.machine.schedule_retry(ctx.run_id, ctx.node_id, ctx.fence, error, delay)
        return Outcome.RETRYING if scheduled else Outcome.STALE
    return fail_for_good(env, ctx, claim, error, classify(exc, retryable=retryable))


def fail_for_good(
    env: ExecutionEnv,
    ctx: NodeContext,
    claim: Claim,
    error: ErrorInfo,
    classification: Classification,
) -> Outcome:
    """Fail the node (dead letter, dependents blocked), or re-plan its branch."""
    runtime = env.runtime
    replanner = replanner_for(runtime, ctx.run_id, claim.node, error.message)
    advance = runtime.machine.fail(
        ctx.run_id,
        ctx.node_id,
        ctx.fence,
        error,
        classification=classification,
        replanner=replanner,
    )
    if advance is None:
        return Outcome.STALE
    log.error(
        "node %s/%s failed for good: dead letter %s", ctx.run_id, ctx.node_id, advance.dead_letter
    )
    dispatch_readied(env, advance.ready, None)
    if advance.run_finished is not None:
        runtime.forget_active(ctx.run_id)
    return Outcome.FAILED


def dispatch_readied(env: ExecutionEnv, ready: list[ReadyNode], eager: EagerSlot | None) -> int:
    """Of the nodes a step readied, ``eager`` keeps one for this worker to run next; the
    others are published, or pooled for the workers of their queue to pull (pool.py).
    Returns how many were pooled."""
    if eager is not None:
        ready = eager.keep_one(ready)
    kept = eager.kept if eager is not None else None
    return dispatch_or_pool(env.broker, env.runtime.machine, env.pulling, env.backlog, ready, kept)


def record_timeout(env: ExecutionEnv, ctx: NodeContext, claim: Claim, timeout_s: float) -> None:
    """Record that the node ran past ``timeout_s``, from the lease keeper's thread while
    the worker may still run: fenced now, so what the worker returns later is refused.
    (A function that ignores ``ctx.stop`` keeps its thread until it returns: threads
    cannot be killed; in the prefork pool Celery's time limits end it.)"""
    ctx.timed_out = True
    error = NodeTimeoutError(f"the node ran out of time: its timeout_s is {timeout_s:g}s")
    if record_failure(env, ctx, claim, error) != Outcome.STALE:
        observe_attempt(env, claim, TIMEOUT_OUTCOME)


def observe_attempt(env: ExecutionEnv, claim: Claim, outcome: str) -> None:
    """Count the attempt in the node-duration metric (one pipelined round trip)."""
    env.runtime.counters.add(attempt_duration(claim, outcome).increments())


def attempt_duration(claim: Claim, outcome: str) -> NodeDuration:
    """The claimed attempt, ended now with ``outcome``, for the node-duration metric."""
    return NodeDuration(claim.node.type, outcome, time.monotonic() - claim.claimed_at)


def wait_for_breaker(
    env: ExecutionEnv, ctx: NodeContext, claim: Claim, exc: BreakerOpenError, error: ErrorInfo
) -> Outcome:
    """Park the node until its dependency's breaker may let calls through again; the
    attempt is given back, so an outage does not use up the node's retries. After
    ``breaker_max_wait_s`` of such waits the node fails into the DLQ instead."""
    settings = env.runtime.settings
    delay = exc.retry_after_s + random.uniform(0, BREAKER_WAIT_JITTER_S)
    waited = env.runtime.machine.wait_on(
        ctx.run_id,
        ctx.node_id,
        ctx.fence,
        error,
        delay,
        kind="breaker",
        name=exc.breaker,
        max_wait_s=settings.breakers.max_wait_s,
        last_failure=exc.last_failure,
    )
    if waited == BreakerWait.EXPIRED:
        return fail_for_good(env, ctx, claim, *breaker_wait_expired(settings, exc))
    if waited == BreakerWait.STALE:
        return Outcome.STALE
    log.info(
        "node %s/%s waits %.1fs for the open breaker %s",
        ctx.run_id,
        ctx.node_id,
        delay,
        exc.breaker,
    )
    return Outcome.RETRYING


def wait_for_batch(
    env: ExecutionEnv, ctx: NodeContext, claim: Claim, exc: LLMBatchPendingError, error: ErrorInfo
) -> Outcome:
    """Park the node until its Message Batch is polled again (the attempt given back: a
    batch processing is not the node failing). The agent loop bounds the wait on one
    batch (``llm_batch_max_wait_s``, from when it was sent); retry.lua bounds it too, from
    the node's first wait on it, should the loop's clock and the server's disagree."""
    settings = env.runtime.settings
    waited = env.runtime.machine.wait_on(
        ctx.run_id,
        ctx.node_id,
        ctx.fence,
        error,
        exc.retry_after_s,
        kind="batch",
        name=exc.batch_id,
        max_wait_s=settings.llm.batch_max_wait_s,
    )
    if waited == BreakerWait.EXPIRED:
        ctx.llm_batches().cancel(exc.batch_id)  # or it goes on, and is billed
        expired = BatchWaitExpiredError(
            f"Message Batch {exc.batch_id} did not answer within "
            f"{settings.llm.batch_max_wait_s:g} s (DAGWRIGHT_LLM_BATCH_MAX_WAIT_S): "
            "cancelled; replay the node to send the call again"
        )
        described = describe_error(expired, known_secrets(settings))
        return fail_for_good(env, ctx, claim, described, Classification.TRANSIENT)
    if waited == BreakerWait.STALE:
        return Outcome.STALE
    log.info("node %s/%s waits on Message Batch %s", ctx.run_id, ctx.node_id, exc.batch_id)
    return Outcome.RETRYING


def wait_for_rate(env: ExecutionEnv, ctx: NodeContext, claim: Claim, over: RateWait) -> Outcome:
    """Park the node until its rate limit has room (RETRY_WAIT, its attempt given back, no
    worker slot held); after ``rate_limit_max_wait_s`` of such waits the attempt fails
    instead (RateLimitWaitExpiredError, retried as its retry policy says)."""
    settings = env.runtime.settings
    waiting = RetryableError(f"over its rate limit {over.limit}: waits {over.wait_s:.1f} s")
    waited = env.runtime.machine.wait_on(
        ctx.run_id,
        ctx.node_id,
        ctx.fence,
        describe_error(waiting),
        over.wait_s,
        kind="rate",
        name=str(over.limit),
        max_wait_s=settings.throttles.rate_limit_max_wait_s,
    )
    if waited == BreakerWait.EXPIRED:
        expired = RateLimitWaitExpiredError(
            f"waited {settings.throttles.rate_limit_max_wait_s:g} s "
            f"for the rate limit {over.limit} "
            "(DAGWRIGHT_RATE_LIMIT_MAX_WAIT_S) without its turn"
        )
        return record_failure(env, ctx, claim, expired)
    if waited == BreakerWait.STALE:
        return Outcome.STALE
    log.info(
        "node %s/%s waits %.1fs for rate limit %s", ctx.run_id, ctx.node_id, over.wait_s, over.limit
    )
    return Outcome.RETRYING


def wait_for_team_task(
    env: ExecutionEnv, ctx: NodeContext, claim: Claim, exc: TeamTaskPendingError, error: ErrorInfo
) -> Outcome:
    """Park a ``celery_task`` node while its task runs on the team's workers, holding no
    slot (the attempt given back): the reconciler wakes it when the task's result is in,
    ``exc.retry_after_s`` at the latest. The node bounds the wait by its ``timeout_s``
    (workers/team_tasks.py); retry.lua's bound is only a backstop for clocks that differ."""
    timeout_s = claim.node.timeout_s or env.runtime.settings.limits.default_timeout_s
    waited = env.runtime.machine.wait_on(
        ctx.run_id,
        ctx.node_id,
        ctx.fence,
        error,
        exc.retry_after_s,
        kind="celery_task",
        name=exc.task_id,
        max_wait_s=timeout_s + env.runtime.settings.celery.task_poll_s,
    )
    if waited == BreakerWait.EXPIRED:
        give_up_waiting(ctx)
        expired = NodeTimeoutError(f"Celery task {exc.task_id} had no result in time: revoked")
        return record_failure(env, ctx, claim, expired)
    if waited == BreakerWait.STALE:
        return Outcome.STALE
    log.info("node %s/%s waits for Celery task %s", ctx.run_id, ctx.node_id, exc.task_id)
    return Outcome.RETRYING


def breaker_wait_expired(
    settings: Settings, exc: BreakerOpenError
) -> tuple[ErrorInfo, Classification]:
    """The failure of a node that waited ``breaker_max_wait_s`` on an open breaker."""
    cause = f"; last failure {exc.last_failure}" if exc.last_failure else ""
    expired = BreakerWaitExpiredError(
        f"gave up after waiting {settings.breakers.max_wait_s:g} s on the open circuit breaker "
        f"{exc.breaker!r} (DAGWRIGHT_BREAKER_MAX_WAIT_S){cause}; replay it once it is back"
    )
    error = describe_error(expired, known_secrets(settings))
    # An outage, not a bad node: a replay is expected to succeed.
    return error, Classification.TRANSIENT


def default_retry(runtime: Runtime, worker_type: str) -> RetryPolicy:
    # The type may be unknown to this worker: that failure itself must be recorded.
    try:
        return runtime.registry.get(worker_type).default_retry
    except KeyError:
        return RetryPolicy()


def describe_error(exc: BaseException, secrets: tuple[str, ...] = ()) -> ErrorInfo:
    """The error as recorded (run state, events, DLQ, logs): secrets masked."""
    # Anything that is not a PermanentError is retryable (see dagwright.errors).
    retryable = isinstance(exc, RetryableError) or not isinstance(exc, PermanentError)
    trace = "".join(traceback.format_exception(exc))
    return ErrorInfo(
        # A team task's failure is recorded under the team's exception class.
        error_class=exc.error_class if isinstance(exc, TeamTaskFailedError) else type(exc).__name__,
        message=redact(str(exc) or type(exc).__name__, secrets),
        retryable=retryable,
        traceback=redact(trace[-MAX_TRACEBACK_CHARS:], secrets),
    )
