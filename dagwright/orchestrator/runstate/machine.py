"""The run state machine in Redis: claim, complete, fail, retry, renew, cancel, reconcile.

Each transition is one atomic Lua script on the run's keys (see ``lua/``). Fencing: every
QUEUED transition increments the node's fence and every claim/complete carries it, so a
duplicate delivery or a zombie worker can never record a second completion.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import redis

from dagwright.keys import NODE_EXECUTE_TASK, RUN_KEY_NAMES, Keys
from dagwright.models import DEFAULT_PRIORITY, MAX_PRIORITY, ErrorInfo, Node, NodeStatus, RunStatus
from dagwright.orchestrator.runstate.dead_letters import DeadLetterWriter
from dagwright.orchestrator.runstate.scripts import PACKAGE, RunScripts
from dagwright.redis_scripts import is_cluster_client, load_script, named_reply
from dagwright.telemetry.counters import NODE_DURATION, Counters, NodeDuration


@dataclass(frozen=True)
class Dispatch:
    """How a queued node is published: its queue, its task and its time limit, its
    worker type (for people reading the message, e.g. in Flower; "" in runs created
    before it was recorded) and its priority (1 to 5, higher first: the node's own, else
    its run's; 3 in runs created before priorities)."""

    queue: str
    time_limit_s: float
    task: str = NODE_EXECUTE_TASK
    worker_type: str = ""
    priority: int = DEFAULT_PRIORITY

    def to_json(self) -> str:
        return json.dumps(
            {
                "queue": self.queue,
                "time_limit_s": self.time_limit_s,
                "task": self.task,
                "worker_type": self.worker_type,
                "priority": self.priority,
            }
        )

    @classmethod
    def from_json(cls, raw: str) -> Dispatch:
        # Fields it does not know are left out: during a rolling upgrade an older worker
        # reads what a newer one wrote (worker_type came in this way).
        known = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in json.loads(raw).items() if key in known})


@dataclass(frozen=True)
class NewNode:
    """A node a planner adds to a running run."""

    id: str
    spec_json: str
    deps: list[str]
    dependents: list[str]
    dispatch: Dispatch

    def to_wire(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "spec": self.spec_json,
            "deps": self.deps,
            "dependents": self.dependents,
            "dispatch": self.dispatch.to_json(),
        }


REPLAN_ID_PLACEHOLDER = "__replan_id__"
AGED_OUT_ERROR = "RunMaxAgeExceeded"  # the error class of an aged-out node's failure
# Rounds of an age-out in one call: each fails the nodes at work, and a round more the
# handlers those failures readied (a chain of handlers: the reconciler's next pass goes on).
AGE_OUT_ROUNDS = 5
CLOCK_SKEW_MS = 60_000  # how far apart the clocks of a Cluster's primaries may be


@dataclass(frozen=True)
class Replanner:
    """A re-planner to add when a node fails for good. fail.lua names it (``id_prefix`` +
    the run's re-plan count) and puts the name in ``spec_template`` for the placeholder."""

    id_prefix: str
    spec_template: str
    dispatch: Dispatch


@dataclass(frozen=True)
class ReadyNode:
    """A node in QUEUED whose message must be published."""

    run_id: str
    node_id: str
    fence: int
    dispatch: Dispatch

    @property
    def lease(self) -> LeaseRef:
        """The lease the node has once claimed under this fence."""
        return LeaseRef(self.run_id, self.node_id, self.fence)

    @classmethod
    def from_row(cls, run_id: str, row: Sequence[Any]) -> ReadyNode:
        """One ``{node, fence, dispatch}`` row of a script's list of queued nodes (rows,
        not name/value pairs: a fan-out returns thousands of them)."""
        node_id, fence, dispatch_json = row
        return cls(run_id, node_id, int(fence), Dispatch.from_json(dispatch_json))


@dataclass(frozen=True)
class AheadLink:
    """A chain's pending node after a node claimed (prelude.lua chain_links): the worker
    may run it before the success of the one before is recorded, its only input being
    that one's output, and record both in one step (decision 128)."""

    node: Node
    dispatch: Dispatch
    attempt: int

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> AheadLink:
        _, spec, dispatch, attempt = row
        return cls(Node.model_validate_json(spec), Dispatch.from_json(dispatch), int(attempt))


@dataclass(frozen=True)
class Claim:
    """A node this worker now runs, with its dependencies' outputs and the checkpoint a
    previous attempt left (None if there is none)."""

    node: Node
    attempt: int
    inputs: dict[str, Any]
    checkpoint: Any = None
    deaths: int = 0  # its process died (a parent saw it) since its last outcome: poison guard
    losses: int = 0  # its worker was lost whole (lease expired) since its last outcome
    run_max_concurrent: int = 0  # the run's max_concurrent_nodes (0: none)
    run_response_cache: bool = False  # the run asked its agents to use the response cache
    run_llm_batch: bool = False  # the run asked its agents' calls to go through batches
    run_inputs: dict[str, Any] = field(default_factory=dict)  # the run's inputs (submit's)
    claimed_at: float = field(default_factory=time.monotonic)  # this process's clock
    # The chain after the node, which this worker may run ahead (a claim made with the
    # success before it, when the worker had room for more nodes than it readied).
    ahead: tuple[AheadLink, ...] = ()

    @classmethod
    def from_reply(cls, reply: Any) -> Claim | Held | None:
        """claim.lua's answer: the claim, the node ``Held`` by another process, or None
        (the message is stale)."""
        fields = named_reply(reply)
        if fields["status"] == "held":
            return Held(fields["holder"])
        if fields["status"] != "ok":
            return None
        outputs = named_reply(fields["inputs"])
        inputs = (
            dependency_outcomes(outputs, fields["outcomes"], fields["errors"])
            if "outcomes" in fields
            else {dep: json.loads(output) for dep, output in outputs.items()}
        )
        return cls(
            node=Node.model_validate_json(fields["spec"]),
            attempt=int(fields["attempt"]),
            inputs=inputs,
            checkpoint=json.loads(fields["checkpoint"]) if fields["checkpoint"] else None,
            deaths=int(fields["deaths"]),
            losses=int(fields["losses"]),
            run_max_concurrent=int(fields["max_concurrent_nodes"] or 0),
            run_response_cache=fields["response_cache"] == "1",
            run_llm_batch=fields.get("llm_batch") == "1",
            run_inputs=json.loads(fields["run_inputs"] or "{}"),
            ahead=tuple(AheadLink.from_row(row) for row in fields.get("ahead", ())),
        )

    def ahead_of(self, link: AheadLink, parent: Success) -> Claim:
        """The claim ``link`` would have, run ahead after ``parent`` (this claim's node or
        a link before it): its attempt, the parent's output as its only input, the run's
        fields as this claim has them."""
        return dataclasses.replace(
            self,
            node=link.node,
            attempt=link.attempt,
            inputs={parent.node_id: json.loads(parent.output_json)},
            checkpoint=None,
            deaths=0,
            losses=0,
            claimed_at=time.monotonic(),
            ahead=(),
        )


def dependency_outcomes(outputs: dict[str, Any], states: Any, errors: Any) -> dict[str, Any]:
    """A handler's inputs (a node with a ``run_if`` rule): each dependency as its outcome,
    ``{"status": "succeeded", "output": ...}``, ``{"status": "failed", "error":
    {"error_class", "message"}}``, ``{"status": "blocked"}`` or ``{"status": "skipped"}``,
    so that an output is never mistaken for an error (no traceback: a handler often
    sends what it gets on, to a chat or a ticket). A ``one_success`` handler starts at its
    first success: a dependency still open is its state alone (``{"status": "running"}``,
    ``"pending"``, ``"queued"``...), with no output."""
    failures = named_reply(errors)
    found: dict[str, Any] = {}
    for dep, state in named_reply(states).items():
        outcome: dict[str, Any] = {"status": state}
        if state == NodeStatus.SUCCEEDED:
            outcome["output"] = json.loads(outputs[dep])
        elif failures.get(dep):
            error = ErrorInfo.model_validate_json(failures[dep])
            outcome["error"] = {"error_class": error.error_class, "message": error.message}
        found[dep] = outcome
    return found


@dataclass(frozen=True)
class Held:
    """The node runs already, under the same fence, in ``holder`` ("<host>:<pid>")."""

    holder: str


@dataclass(frozen=True)
class Advance:
    """What completing a node changed: nodes now ready, and the run's final status if any
    (and the dead letter its failure wrote)."""

    ready: list[ReadyNode]
    run_finished: RunStatus | None
    dead_letter: str | None = None
    running: int = 0  # the run's nodes still running (on other workers), complete.lua's
    # Dependents left to release (complete.lua, settle.lua): ``RunStateMachine.settle``.
    settling: bool = False
    # The nodes claimed in the same step for the worker that runs on (``RunOn``), in
    # the order it runs them, not among ``ready``.
    claimed: tuple[tuple[ReadyNode, Claim], ...] = ()
    # Of a batch of successes (``RunStateMachine.complete_many``): the nodes no longer
    # the worker's, for which nothing was recorded.
    stale: frozenset[str] = frozenset()

    @classmethod
    def from_reply(cls, run_id: str, reply: Any) -> Advance | None:
        """The answer of complete.lua, fail.lua, expand.lua or settle.lua; None if stale."""
        fields = named_reply(reply)
        if fields["status"] != "ok":
            return None
        return cls(
            ready=_ready_nodes(run_id, fields["ready"]),
            run_finished=_final(fields["run_finished"]),
            dead_letter=fields.get("dead_letter"),
            running=int(fields.get("running") or 0),
            settling=int(fields.get("settling") or 0) == 1,
            claimed=tuple(_claimed(run_id, pair) for pair in fields.get("claimed", ())),
            stale=frozenset(fields.get("stale", ())),
        )


def _claimed(run_id: str, pair: Sequence[Any]) -> tuple[ReadyNode, Claim]:
    row, reply = pair
    claim = Claim.from_reply(reply)
    assert isinstance(claim, Claim), claim  # claim_all answers only 'ok'
    return ReadyNode.from_row(run_id, row), claim


@dataclass(frozen=True)
class RunOn:
    """A worker that runs on after a success (execution/eager.py): the step that records
    the success also claims for ``holder``, with a lease of ``lease_s``, the first
    ``batch`` nodes it readied or pulled on the worker's queues whose time limits are at
    most ``max_time_limit_s``, which saves the worker a claim of its own. With ``links``,
    a chain's node claimed alone comes with the links after it (``Claim.ahead``), up to
    ``batch`` nodes in all, for the worker to run ahead (decision 128)."""

    holder: str
    lease_s: float
    max_time_limit_s: float
    batch: int = 1
    links: bool = False

    def args(self) -> tuple[str, int, int, int, int]:
        """complete.lua's arguments after the successes."""
        lease_ms, limit_ms = int(self.lease_s * 1000), int(self.max_time_limit_s * 1000)
        return self.holder, lease_ms, limit_ms, self.batch, int(self.links)


# The fence of a success run ahead (decision 128): it was never claimed, and no claim's
# fence is 0, so complete.lua tells it from the others by it.
AHEAD_FENCE = 0


@dataclass(frozen=True)
class Success:
    """A node's recorded output (``RunStateMachine.complete_many``), and its attempt's
    duration for the node-duration metric (None: not counted). Under ``AHEAD_FENCE``, a
    chain's link run ahead: recorded after the success before it in the same step."""

    node_id: str
    fence: int
    output_json: str
    duration: NodeDuration | None = None

    def lease(self, run_id: str) -> LeaseRef:
        """The lease its node held, in ``run_id``."""
        return LeaseRef(run_id, self.node_id, self.fence)


@dataclass(frozen=True)
class Replayed:
    """A dead letter replayed: its node is queued again, its run re-opened if it had ended."""

    ready: list[ReadyNode]
    reopened: bool

    @classmethod
    def from_reply(cls, run_id: str, reply: Any) -> Replayed | ReplayRefused:
        """replay.lua's answer."""
        fields = named_reply(reply)
        if fields["status"] == "done":
            return ReplayRefused(f"it was {fields['was']} already", done=True)
        if fields["status"] == "refused":
            return ReplayRefused(fields["why"])
        if fields["status"] == "busy":
            return ReplayRefused(
                f"node {fields['node']!r} after it is {fields['state']} (it ran because of "
                "this failure): replay once it has finished"
            )
        return cls(ready=_ready_nodes(run_id, fields["ready"]), reopened=bool(fields["reopened"]))


@dataclass(frozen=True)
class ReplayRefused:
    """Why a dead letter cannot be replayed; ``done`` if it was replayed or purged before."""

    reason: str
    done: bool = False


@dataclass(frozen=True)
class StoppedWork:
    """What stopping a run (cancel, run timeout) left to do outside Redis: tell the workers
    of its ``running`` nodes to stop them, and revoke the messages of its ``queued`` ones."""

    running: list[str]
    queued: list[ReadyNode]
    teardown: list[ReadyNode] = field(default_factory=list)
    """Teardown nodes (``run_if: always``) the stop queued: to publish."""
    tearing_down: bool = False
    """The run stays open for its teardown nodes: only ``running`` are to stop, not all
    of the run's nodes (prelude.lua, Teardown)."""


@dataclass(frozen=True)
class Cancelled:
    """A cancel's outcome: ``cancelled``, the status of a run already final, or
    ``missing``; ``stopped`` is the work to stop when it did cancel the run."""

    outcome: str
    stopped: StoppedWork | None = None

    @classmethod
    def from_reply(cls, run_id: str, reply: Any) -> Cancelled:
        """cancel.lua's answer (only a cancel that happened names work to stop)."""
        fields = named_reply(reply)
        if "running" not in fields:  # missing, or final already (cancelled before, perhaps)
            return cls(fields["outcome"])
        return cls(fields["outcome"], _stopped_work(run_id, fields))


@dataclass(frozen=True)
class LossBackoff:
    """How long a node whose worker was lost waits before it is queued again:
    ``base_s`` after its first loss, doubled after each next one, at most ``max_s``
    (lua/reconcile.lua). Settings ``worker_loss_backoff_s``/``worker_loss_backoff_max_s``."""

    base_s: float
    max_s: float


@dataclass(frozen=True)
class ReconcilePass:
    status: str
    requeued: list[ReadyNode]
    unpublished: list[ReadyNode]
    stranded: list[ReadyNode]
    timed_out: StoppedWork | None = None  # the pass ended the run: past its run timeout
    aged: list[ReadyNode] = field(default_factory=list)  # waited past priority aging
    gated: bool = False  # the run waits for its concurrency key (run_gates.py)
    age_ms: int = 0  # how long it has been open (since created or re-opened by a replay)

    @classmethod
    def from_reply(cls, run_id: str, reply: Any) -> ReconcilePass:
        """reconcile.lua's answer (lists it leaves out are empty)."""
        fields = named_reply(reply)
        timed_out = None
        if "timed_out_running" in fields:
            timed_out = _stopped_work(
                run_id,
                {
                    **fields,
                    "running": fields["timed_out_running"],
                    "queued": fields["timed_out_queued"],
                },
            )
        return cls(
            status=fields["status"],
            requeued=_ready_nodes(run_id, fields.get("requeued", [])),
            unpublished=_ready_nodes(run_id, fields.get("unpublished", [])),
            stranded=_ready_nodes(run_id, fields.get("stranded", [])),
            timed_out=timed_out,
            aged=_ready_nodes(run_id, fields.get("aged", [])),
            gated=fields.get("gated") == 1,
            age_ms=int(fields.get("age_ms", 0)),
        )


_ENCODED_RUN_KEY_NAMES = tuple(name.encode() for name in RUN_KEY_NAMES)


@dataclass(frozen=True)
class ReconcileTerms:
    """What a reconciler pass over a run looks for (reconcile.lua's ARGV): see
    ``RunStateMachine.reconcile_run``."""

    publish_grace_s: float
    stranded_after_s: float
    empty_queues: tuple[str, ...] = ()
    limit: int = 1000
    priority_aging_s: float = 0.0
    aging_limit: int = 100
    loss_backoff: LossBackoff = LossBackoff(0.0, 0.0)  # a lost worker's node: queued at once

    def args(self) -> tuple[Any, ...]:
        return (
            int(self.publish_grace_s * 1000),
            int(self.stranded_after_s * 1000),
            self.limit,
            int(self.priority_aging_s * 1000),
            self.aging_limit,
            int(self.loss_backoff.base_s * 1000),
            int(self.loss_backoff.max_s * 1000),
            *self.empty_queues,
        )


@dataclass(frozen=True)
class Forgotten:
    """forget.lua's answer: whether the run left the active set (true as a bool), and its
    concurrency key ('' for none), whose place its caller gives back."""

    forgotten: bool
    concurrency_key: str = ""

    def __bool__(self) -> bool:
        return self.forgotten


@dataclass(frozen=True)
class AgedOut:
    """age_out.lua's answer: the run's status after it, what was still in flight (to stop
    and revoke), and how many dead letters it wrote."""

    status: str
    stopped: StoppedWork
    dead_letters: int


@dataclass(frozen=True)
class EndedRetention:
    """How long an ended run keeps its checkpoints (if it succeeded), events and spans,
    in seconds (None: as long as the run; see ``Settings.checkpoint_retention_s``)."""

    checkpoints_s: int | None = 0
    events_s: int | None = None
    spans_s: int | None = None


# How many nodes of a succeeded run one step of compact.lua folds (decision 126): a
# 10,000-node run's fold in one step held the server ~25 ms, a step of 500 ~1.5 ms.
FOLD_CHUNK = 500
# A bound on one forget's fold steps, so that no loop can run on: an HSCAN of a run's
# nodes ends in about nodes / FOLD_CHUNK steps (20 for the default max_nodes).
MAX_FOLD_STEPS = 100_000


@dataclass(frozen=True)
class Compacted:
    """compact.lua's answer: the run's status ('open', 'missing' or final), how many of
    its keys it deleted, and whether its fold has chunks left (call it again)."""

    status: str
    dropped: int
    folding: bool = False

    @classmethod
    def from_reply(cls, reply: Any) -> Compacted:
        fields = named_reply(reply)
        return cls(
            str(fields["status"]), int(fields["dropped"]), bool(int(fields.get("folding") or 0))
        )


ENDED_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)  # as the scripts


def ended_run_keys(keys: Keys) -> tuple[str, ...]:
    """The ended runs' sorted sets, one per final status, in the order forget.lua and
    replay.lua name them."""
    return tuple(keys.ended_runs(status.value) for status in ENDED_STATUSES)


def _seconds_or_forever(seconds: int | None) -> int:
    """A retention as compact.lua reads it: -1 for as long as the run."""
    return -1 if seconds is None else seconds


@dataclass(frozen=True)
class Admission:
    """admit.lua's answer: whether the run took a place of its concurrency key, how many
    runs hold one now, and its roots to publish."""

    admitted: bool
    held: int
    ready: list[ReadyNode]
    expired: bool = False  # it waited too long: the run failed

    @classmethod
    def from_reply(cls, run_id: str, reply: Any) -> Admission:
        fields = named_reply(reply)
        ready = _ready_nodes(run_id, fields["ready"])
        expired = bool(int(fields.get("expired", 0)))
        return cls(bool(int(fields["admitted"])), int(fields["held"]), ready, expired)


@dataclass(frozen=True)
class BudgetRefusal:
    """The run's budget has no room for a call: the limit (a dimension of
    workers/budgets.py) it would pass, what the run spent, what calls in flight hold."""

    dimension: str
    limit: float
    spent: float
    held: float
    projected: float

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> BudgetRefusal:
        numbers = ("limit", "spent", "held", "projected")
        return cls(fields["dimension"], *(float(fields[name]) for name in numbers))


@dataclass(frozen=True)
class Reservation:
    """The answer of reserve.lua: ``owned`` False if the node is no longer this
    worker's; else held, unless ``refusal`` says why not."""

    owned: bool
    refusal: BudgetRefusal | None = None

    @classmethod
    def from_reply(cls, reply: Any) -> Reservation:
        fields = named_reply(reply)
        if fields["status"] == "lost":
            return cls(owned=False)
        if fields["status"] == "over":
            return cls(owned=True, refusal=BudgetRefusal.from_fields(fields))
        return cls(owned=True)


WaitKind = Literal["breaker", "batch", "rate", "celery_task"]


class BreakerWait(enum.StrEnum):
    """What ``wait_on`` did (retry.lua's status)."""

    PARKED = "ok"  # the node waits in RETRY_WAIT
    EXPIRED = "expired"  # it has waited long enough: fail it
    STALE = "stale"  # the claim is no longer ours


@dataclass(frozen=True)
class LeaseRef:
    run_id: str
    node_id: str
    fence: int


class RunStateMachine:
    """Typed calls over the Lua scripts, for one Redis client."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        events_maxlen: int,
        retention_s: int,
        dlq_retention_s: int,
    ):
        self.client = client
        self.keys = keys
        self.dlq_retention_s = dlq_retention_s
        self._scripts = RunScripts(client, events_maxlen=events_maxlen, retention_s=retention_s)
        self._counters = Counters(client, keys)
        self._gate_take = load_script(client, PACKAGE, "gate_take")
        self._dead_letters = DeadLetterWriter(client, keys, retention_s=dlq_retention_s)
        self._cluster = is_cluster_client(client)
        # Every script call names all of the run's keys; encoding them once per run, not
        # per call, is a measurable share of a no-op node's cost.
        self._encoded_keys = lru_cache(maxsize=4096)(self._encode_keys)

    def _encode_keys(self, run_id: str) -> tuple[bytes, ...]:
        # keys.run_keys' names, built from one prefix: a reconciler pass encodes 10,000 runs'
        base = self.keys.run_key(run_id, RUN_KEY_NAMES[0]).removesuffix(RUN_KEY_NAMES[0]).encode()
        return tuple(base + name for name in _ENCODED_RUN_KEY_NAMES)

    def _call(
        self,
        name: str,
        run_id: str,
        *args: Any,
        shared_keys: tuple[str, ...] = (),
        uncached: bool = False,
    ) -> Any:
        """Run a script on a run's keys. ``uncached``: for a sweep over many runs (the
        reconciler's), which would only push the hot runs' keys out of the cache."""
        keys = self._script_keys(run_id, shared_keys, uncached=uncached)
        return self._scripts.call(name, keys, *args)

    def _script_keys(
        self, run_id: str, shared_keys: tuple[str, ...], *, uncached: bool = False
    ) -> tuple[bytes, ...]:
        """A run script's KEYS: the run's, its ``shared_keys``, the pooled counter last."""
        shared = (*shared_keys, self._pooled_key(run_id))
        run_keys = self._encode_keys(run_id) if uncached else self._encoded_keys(run_id)
        return (*run_keys, *(key.encode() for key in shared))

    def _scripts_in_order(
        self, run_id: str, calls: list[tuple[str, tuple[str, ...], tuple[Any, ...]]]
    ) -> list[Any]:
        """Idempotent scripts on one run, ``(name, shared_keys, args)`` each, in order: one
        round trip on one server, a call each on a Cluster (its pipelines take no script)."""
        if self._cluster:
            return [
                self._call(name, run_id, *args, shared_keys=shared) for name, shared, args in calls
            ]
        return self._scripts.call_in_one_trip(
            [(name, self._script_keys(run_id, shared), args) for name, shared, args in calls]
        )

    def _in_order(self, steps: list[Callable[[Any], Any]]) -> list[Any]:
        """Commands that must run in this order, each ``step(client)``: one pipeline (one
        round trip, its order kept) on one server; a call each on a Cluster, whose
        pipeline keeps the order only within each node."""
        if self._cluster:
            return [step(self.client) for step in steps]
        pipe = self.client.pipeline(transaction=False)
        for step in steps:
            step(pipe)
        return list(pipe.execute())

    def _pooled_key(self, run_id: str) -> str:
        """The last key of every script call (prelude.lua POOLED): the deployment's
        pooled-nodes counter, or on a Cluster, where that is in another slot, the run's
        own count (``keys.run_pooled``), which the reconcilers total by bucket
        (execution/bucket_backlog.py)."""
        return self.keys.run_pooled(run_id) if self._cluster else self.keys.pooled_nodes

    def _in_run_slot_or(self, run_id: str, key: str) -> str:
        """``key``, a deployment-wide key a run script may change in its step; on a
        Cluster, where it is in another slot, the run's own hash in its place (the script
        then leaves it alone and the caller does what must be done in a step of its own)."""
        return self.keys.run_key(run_id, "run") if self._cluster else key

    def claim(
        self,
        run_id: str,
        node_id: str,
        fence: int,
        *,
        lease_s: float,
        holder: str,
        takeover: str = "",
    ) -> Claim | Held | None:
        """Claim a queued node; None if the message is stale (fence, state or run moved on)."""
        reply = self._call("claim", run_id, node_id, fence, int(lease_s * 1000), holder, takeover)
        return Claim.from_reply(reply)

    def complete(
        self,
        run_id: str,
        node_id: str,
        fence: int,
        output_json: str,
        *,
        duration: NodeDuration | None = None,
        pull_from: Sequence[str] = (),
        run_on: RunOn | None = None,
    ) -> Advance | None:
        """Record success and count the attempt's ``duration``; None if this worker no
        longer owns the node (nothing is counted then). See ``complete_many``."""
        success = Success(node_id, fence, output_json, duration)
        return self.complete_many(run_id, [success], pull_from=pull_from, run_on=run_on)

    def complete_many(
        self,
        run_id: str,
        successes: Sequence[Success],
        *,
        pull_from: Sequence[str] = (),
        run_on: RunOn | None = None,
        holder: str = "",
    ) -> Advance | None:
        """Record the successes of nodes of one run, in order, and count their durations
        in one step; None if none of them is this worker's any more (nothing is counted
        then), else those that were not are ``Advance.stale``. The count is in the same
        step on one server; on a Cluster, where the counters are in another slot, it
        follows the step (a crash in between loses a sample of a metric, never a node).
        With ``pull_from`` (the queues of a worker that runs on) and no node of them
        readied, one node of the run's pool is taken too, and is among the ready (see
        ``pool``). With ``run_on`` too, the nodes that worker runs next (``RunOn.batch``,
        pulled as needed) are claimed in the same step (``Advance.claimed``). ``holder``
        (or ``run_on``'s) is the worker the events of links run ahead name."""
        counted_here = not self._cluster
        recorded: list[Any] = [len(successes)]
        for success in successes:
            duration = success.duration
            fields = duration.fields() if counted_here and duration is not None else ("", "", 0)
            recorded += [success.node_id, success.fence, success.output_json, *fields]
        claiming = run_on.args() if run_on is not None and pull_from else (holder, 0, 0, 1, 0)
        reply = self._call(
            "complete",
            run_id,
            *recorded,
            *claiming,
            *pull_from,
            shared_keys=(self._in_run_slot_or(run_id, self.keys.metrics(NODE_DURATION)),),
        )
        advance = Advance.from_reply(run_id, reply)
        if advance is not None and not counted_here:
            self._counters.add(
                [
                    increment
                    for success in successes
                    if success.duration is not None and success.node_id not in advance.stale
                    for increment in success.duration.increments()
                ]
            )
        return advance

    def pool(self, run_id: str, nodes: list[ReadyNode]) -> int:
        """Leave these queued nodes of one run unpublished, in the run's pool, for the
        workers of their queues to pull as they finish nodes (``complete(pull_from=)``,
        ``pull``); the reconciler publishes a pool nobody pulls from. Returns how many
        were pooled (a node already claimed or published is left alone)."""
        triples = [
            item
            for node in nodes
            for item in (
                node.dispatch.queue,
                str(MAX_PRIORITY - node.dispatch.priority),
                node.node_id,
            )
        ]
        fields = named_reply(self._call("pool", run_id, *triples))
        return int(fields.get("pooled", 0))

    def settle(self, run_id: str) -> Advance | None:
        """Release the next chunk of the dependents a success left uncounted (a big
        fan-out: ``Advance.settling``), at most ``scripts.SETTLE_CHUNK``, each a short
        step so that other runs' commands run between them; the ready nodes are queued
        (in the outbox) for the caller to dispatch or pool. None if the run is no longer
        open. The reconciler releases what a dead caller left (reconcile.lua)."""
        return Advance.from_reply(run_id, self._call("settle", run_id))

    def pull(self, run_id: str, queues: Sequence[str]) -> list[ReadyNode]:
        """One node of the run's pool on one of ``queues`` (none if it has none): for a
        worker whose node ended otherwise than by a success."""
        return _ready_nodes(run_id, named_reply(self._call("pull", run_id, *queues))["ready"])

    def fail(
        self,
        run_id: str,
        node_id: str,
        fence: int,
        error: ErrorInfo,
        *,
        classification: str = "permanent",
        replanner: Replanner | None = None,
    ) -> Advance | None:
        """Record a final failure (its dependents decided by their ``run_if``: BLOCKED, or
        queued if they are handlers) and its dead letter, adding
        ``replanner`` for the failed subgraph in the same step if the run still may
        re-plan. None if this worker no longer owns the node."""
        replan_args = (
            [replanner.id_prefix, replanner.spec_template, replanner.dispatch.to_json()]
            if replanner
            else ["", "", ""]
        )
        entry = self._dead_letters.add(run_id, node_id, fence, error, classification)
        reply = self._call(
            "fail",
            run_id,
            node_id,
            fence,
            error.model_dump_json(),
            *replan_args,
            entry,
        )
        advance = Advance.from_reply(run_id, reply)
        if advance is None:
            self._dead_letters.withdraw(entry)
        return advance

    def replay(
        self,
        run_id: str,
        node_id: str,
        fence: int,
        *,
        entry_id: str,
        fresh: bool = False,
    ) -> Replayed | ReplayRefused:
        """Queue a dead-lettered node again (see lua/replay.lua). The run joins the active
        set before the step that may re-open it (a crash after it leaves the reconciler
        a run to visit, never an open run it cannot see; one that stays ended is dropped
        by its next pass) and after it (a ``forget`` that raced the step may have dropped
        it in between); a re-opened run then leaves the ended runs' sets, and the dead
        letter joins the replayed ones still in the stream (``keys.dlq_settled``: a crash
        before that leaves the DLQ's depth one too high until the entry is trimmed)."""
        self.client.sadd(self.keys.active_runs, run_id)
        reply = self._call(
            "replay",
            run_id,
            node_id,
            fence,
            "1" if fresh else "",
            entry_id,
            self.dlq_retention_s,
            run_id,
            shared_keys=(
                self.keys.dlq_status(run_id, entry_id),
                self.keys.run_scores(run_id),
                self.keys.run_logs(run_id),
            ),
        )
        replayed = Replayed.from_reply(run_id, reply)
        if isinstance(replayed, Replayed):
            if replayed.reopened:
                self._reopened(run_id)
            entry_ms = int(entry_id.partition("-")[0])
            self.client.zadd(self.keys.dlq_settled, {entry_id: entry_ms})
        return replayed

    def _reopened(self, run_id: str) -> None:
        """A run re-opened (by a replay) is active again and in no ended runs' set: one
        pipeline, each command in its own slot."""
        pipe = self.client.pipeline(transaction=False)
        pipe.sadd(self.keys.active_runs, run_id)
        for key in ended_run_keys(self.keys):
            pipe.zrem(key, run_id)
        pipe.execute()

    def expand(
        self,
        run_id: str,
        planner_id: str,
        fence: int,
        *,
        output_json: str,
        new_nodes: list[NewNode],
        output_nodes: list[str] | None,
        replaced: list[str],
    ) -> Advance | None:
        """Complete a planner node by adding its plan's nodes to the run (and marking the
        failed subgraph it replaces). None if this worker no longer owns the planner."""
        reply = self._call(
            "expand",
            run_id,
            planner_id,
            fence,
            output_json,
            json.dumps([node.to_wire() for node in new_nodes]),
            json.dumps(output_nodes) if output_nodes is not None else "",
            json.dumps(replaced),
        )
        return Advance.from_reply(run_id, reply)

    def spawn(
        self, run_id: str, node_id: str, fence: int, children: list[tuple[str, str]], over: str
    ) -> Advance | None:
        """Add a mapped node's ``children`` ((id, spec JSON) in the items' order, each
        holding its item of ``over``'s list) and queue them, the node waiting for them to
        join (an empty list: it succeeds with ``[]``); one fenced step. None if this worker
        no longer owns the node."""
        wire = json.dumps([{"id": child, "spec": spec} for child, spec in children])
        reply = self._call("spawn", run_id, node_id, fence, wire, over)
        return Advance.from_reply(run_id, reply)

    def schedule_retry(
        self, run_id: str, node_id: str, fence: int, error: ErrorInfo, delay_s: float
    ) -> bool:
        """Park the node for ``delay_s`` after a failed attempt. False if the claim is no
        longer ours."""
        reply = self._call(
            "retry",
            run_id,
            node_id,
            fence,
            error.model_dump_json(),
            int(delay_s * 1000),
            "",
            "",
            0,
            "",
        )
        return _succeeded(reply)

    def wait_on(
        self,
        run_id: str,
        node_id: str,
        fence: int,
        error: ErrorInfo,
        delay_s: float,
        *,
        kind: WaitKind,
        name: str,
        max_wait_s: float,
        last_failure: str = "",
    ) -> BreakerWait:
        """Park the node for ``delay_s`` while it waits on ``name``: an open circuit
        breaker, the Message Batch its call is in, or the team Celery task it sent
        (``kind``), giving its attempt back
        (it was not the node failing), unless its waits of that kind have lasted
        ``max_wait_s`` already: then nothing changes, and the caller fails it."""
        reply = self._call(
            "retry",
            run_id,
            node_id,
            fence,
            error.model_dump_json(),
            int(delay_s * 1000),
            name,
            last_failure,
            int(max_wait_s * 1000),
            kind,
        )
        return BreakerWait(named_reply(reply)["status"])

    def park(self, run_id: str, node_id: str, fence: int, *, limit: str, recheck_s: float) -> bool:
        """Put a claimed node back to QUEUED (same fence, attempt given back) while it
        waits for a slot of ``limit``; the stranded rule looks at it again only after
        ``recheck_s``. False if the claim is no longer ours."""
        return _owned(self._call("park", run_id, node_id, fence, limit, int(recheck_s * 1000)))

    def admit(
        self, run_id: str, holders_key: str, waiters_key: str, *, max_wait_s: float
    ) -> Admission:
        """Let a run waiting for its concurrency key start if the key has room (the key's
        holders and waiters are ``holders_key``/``waiters_key``); one that waited
        ``max_wait_s`` fails instead. Two steps, each in one Cluster slot: the place is
        taken in the key's (lua/gate_take.lua), then the run admitted in its own
        (lua/admit.lua); a caller dying in between leaves the run holding a place and
        still waiting, and the next call (the reconciler's pass) admits it."""
        gate, limit, created = self.client.hmget(
            self.keys.run_key(run_id, "run"), ["gate", "concurrency_limit", "created_at"]
        )
        if _text(gate or "") != "waiting" or limit is None or created is None:
            return Admission(False, 0, [])
        place = named_reply(
            self._gate_take(
                keys=[holders_key, waiters_key],
                args=[run_id, int(created), int(limit), int(max_wait_s * 1000)],
            )
        )
        reply = self._call(
            "admit", run_id, run_id, int(place["taken"]), int(place["held"]), int(place["expired"])
        )
        return Admission.from_reply(run_id, reply)

    def record_progress(
        self,
        lease: LeaseRef,
        *,
        lease_s: float,
        checkpoint_json: str = "",
        usage_json: str = "",
        event: list[str | int | float] | None = None,
    ) -> bool:
        """Save a checkpoint and/or one LLM call's usage and event, fenced; renews the
        lease. False if this worker no longer owns the node."""
        reply = self._call(
            "progress",
            lease.run_id,
            lease.node_id,
            lease.fence,
            int(lease_s * 1000),
            checkpoint_json,
            usage_json,
            json.dumps(event) if event else "",
        )
        return _owned(reply)

    def reserve_budget(self, lease: LeaseRef, worst_case: dict[str, float]) -> Reservation:
        """Hold ``worst_case`` (by dimension) of the run's budget for the node's next LLM
        call, if the run has room for it (see lua/reserve.lua)."""
        reply = self._call(
            "reserve", lease.run_id, lease.node_id, lease.fence, json.dumps(worst_case)
        )
        return Reservation.from_reply(reply)

    def write_workspace_file(self, lease: LeaseRef, path: str, content: str) -> bool:
        """Write a workspace file for a node this worker runs; False if it no longer does."""
        return _owned(
            self._call("workspace", lease.run_id, lease.node_id, lease.fence, path, content)
        )

    def renew(self, leases: list[LeaseRef], lease_s: float) -> list[bool]:
        """Extend leases in one round trip (on a Cluster one to each primary holding
        some); False for each lease no longer held."""
        calls = [
            (
                "renew",
                self._script_keys(lease.run_id, ()),
                (lease.node_id, lease.fence, int(lease_s * 1000)),
            )
            for lease in leases
        ]
        return [_owned(reply) for reply in self._scripts.call_in_one_trip(calls)]

    def await_approval(
        self,
        lease: LeaseRef,
        *,
        request_json: str,
        deadline_ms: int,
        audit: dict[str, str],
    ) -> bool:
        """Park a running node until a person decides (its worker slot is freed); False
        if this worker no longer owns the node. The pending index (another slot) is
        written first: a crash after it leaves an entry of a running node, which
        ``approvals list`` skips and the reconciler drops at its deadline; never a
        waiting node that no list shows and no timeout reaches."""
        member = pending_member(lease.run_id, lease.node_id)
        self.client.zadd(self.keys.pending_approvals, {member: deadline_ms})
        reply = self._call(
            "await_approval",
            lease.run_id,
            lease.node_id,
            lease.fence,
            request_json,
            deadline_ms,
            member,
            *_flatten(audit),
        )
        return _succeeded(reply)

    def decide_approval(
        self,
        run_id: str,
        node_id: str,
        *,
        approval_id: str,
        approved: bool,
        decision_json: str,
        audit: dict[str, str],
    ) -> list[ReadyNode] | str:
        """Record the decision on approval ``approval_id`` and queue its node again: the
        nodes to publish, or why the request is no longer waiting. The request then
        leaves the pending index (another slot), unless its node runs (it may be about
        to wait again); a crash in between leaves an entry that ``approvals list`` drops."""
        reply = self._call(
            "decide",
            run_id,
            node_id,
            approval_id,
            decision_json,
            "approved" if approved else "rejected",
            pending_member(run_id, node_id),
            *_flatten(audit),
        )
        fields = named_reply(reply)
        if int(fields.get("unindex", 1)):
            self.client.zrem(self.keys.pending_approvals, pending_member(run_id, node_id))
        if fields["status"] != "ok":
            return str(fields["why"])
        return _ready_nodes(run_id, fields["ready"])

    def cancel(self, run_id: str, reason: str) -> Cancelled:
        """Cancel a run (see lua/cancel.lua); ``reason`` becomes its ``stop_reason``."""
        return Cancelled.from_reply(run_id, self._call("cancel", run_id, reason))

    def record_death(self, lease: LeaseRef, cause: str) -> int:
        """Count a death of the process running the node, seen by its worker's surviving
        parent (lua/death.lua); the node's deaths so far, or 0 when the claim that died is
        no longer the node's (its fence moved on: nothing is counted)."""
        reply = self._call("death", lease.run_id, lease.node_id, lease.fence, cause)
        return int(named_reply(reply)["counted"])

    def reconcile_run(
        self,
        run_id: str,
        *,
        publish_grace_s: float,
        stranded_after_s: float,
        empty_queues: Sequence[str] = (),
        limit: int = 1000,
        priority_aging_s: float = 0.0,
        aging_limit: int = 100,
        loss_backoff: LossBackoff | None = None,
    ) -> ReconcilePass:
        """One reconciler pass over a run; ``empty_queues`` are the queues known to be
        empty now (a queued node counts as stranded only if its queue is one of them).
        Nodes waiting in the broker over ``priority_aging_s`` (0: none), below the top
        priority, are listed as ``aged``, at most ``aging_limit``. A node whose lease
        expired is queued again after ``loss_backoff`` (None: at once)."""
        terms = ReconcileTerms(
            publish_grace_s, stranded_after_s, tuple(empty_queues), limit,
            priority_aging_s, aging_limit, loss_backoff or LossBackoff(0.0, 0.0),
        )  # fmt: skip
        return ReconcilePass.from_reply(run_id, self._call("reconcile", run_id, *terms.args()))

    def reconcile_runs(
        self, run_ids: Sequence[str], terms: ReconcileTerms
    ) -> list[ReconcilePass | Exception]:
        """``reconcile_run`` over several runs in one round trip (a pipeline of the
        script, one step per run: the others' steps go in between; on a Cluster one
        round trip to each primary); a run whose step failed gets its error in its
        place, the others their pass."""
        args = terms.args()
        calls = [
            ("reconcile", self._script_keys(run_id, (), uncached=True), args) for run_id in run_ids
        ]
        replies = self._scripts.call_in_one_trip(calls, raise_errors=False)
        return [
            reply if isinstance(reply, Exception) else ReconcilePass.from_reply(run_id, reply)
            for run_id, reply in zip(run_ids, replies, strict=True)
        ]

    def age_out(self, run_id: str, max_age_s: int) -> AgedOut:
        """Fail a run open for longer than ``max_age_s`` (since its creation or its last
        re-opening): its nodes at work fail with dead letters, in steps of one Cluster
        slot each, in the order fail() keeps (a node's dead letter before its failure):
        mark the run and list its nodes (lua/age_out_begin.lua); add their dead letters
        (the DLQ stream); fail them naming those (lua/age_out.lua), deleting the letters
        of nodes that moved on meanwhile. The handlers the failures readied are failed
        by the next round, at most ``AGE_OUT_ROUNDS`` (the reconciler's next pass goes
        on). A caller dying after adding the letters leaves the run marked: the next
        call finds the letters added since the mark and reuses them (none added twice)."""
        reason = (
            f"open longer than its maximum age ({max_age_s} s, run_max_age_s): failed by "
            "the reconciler; `dagwright dlq replay` runs it again"
        )
        error = ErrorInfo(error_class=AGED_OUT_ERROR, message=reason, retryable=False)
        aged = AgedOut("", StoppedWork(running=[], queued=[]), 0)
        for _ in range(AGE_OUT_ROUNDS):
            begun = named_reply(self._call("age_out_begin", run_id, max_age_s * 1000, reason))
            if not begun["since"]:  # ended, or not too old
                status = aged.status or str(begun["status"])
                return dataclasses.replace(aged, status=status)
            triples = self._aged_out_letters(run_id, begun, error)
            aged = _aged_further(aged, run_id, self._fail_aged(run_id, error, triples))
            if aged.status not in OPEN_STATUSES:
                return aged
        return aged

    def _aged_out_letters(
        self, run_id: str, begun: dict[str, Any], error: ErrorInfo
    ) -> list[tuple[str, str, str]]:
        """(node, fence, dead letter id) for each node age_out_begin.lua listed: those a
        caller that died added since the mark, reused; the others added now."""
        nodes = [(str(node), str(fence)) for node, fence in begun["nodes"]]
        found: dict[tuple[str, str], str] = {}
        if begun["resumed"] and nodes:
            since_ms = int(begun["since"]) - CLOCK_SKEW_MS  # the DLQ may be on another primary
            found = self._dead_letters.added_since(run_id, AGED_OUT_ERROR, since_ms)
        missing = [item for item in nodes if item not in found]
        added = self._dead_letters.add_many(run_id, list(missing), error, "transient")
        found.update(zip(missing, added, strict=True))
        return [(node, fence, found[(node, fence)]) for node, fence in nodes]

    def _fail_aged(
        self, run_id: str, error: ErrorInfo, triples: list[tuple[str, str, str]]
    ) -> dict[str, Any]:
        """lua/age_out.lua over ``triples``; the dead letters it refused are deleted."""
        args = [item for triple in triples for item in triple]
        fields = named_reply(self._call("age_out", run_id, error.model_dump_json(), *args))
        for entry in fields["refused"]:
            self._dead_letters.withdraw(str(entry))
        return fields

    def compact(self, run_id: str, retention: EndedRetention) -> Compacted:
        """Drop what an ended run's surfaces no longer read and shorten what the
        ``retention`` settings keep less long (lua/compact.lua); an open run is left alone."""
        name, shared, args = self._compaction(run_id, retention)
        return Compacted.from_reply(self._call(name, run_id, *args, shared_keys=shared))

    def _compaction(
        self, run_id: str, retention: EndedRetention
    ) -> tuple[str, tuple[str, ...], tuple[Any, ...]]:
        args = (
            _seconds_or_forever(retention.checkpoints_s),
            _seconds_or_forever(retention.events_s),
            _seconds_or_forever(retention.spans_s),
            FOLD_CHUNK,
        )
        return "compact", (self.keys.run_logs(run_id), self.keys.run_scores(run_id)), args

    def _fold_on(self, run_id: str, retention: EndedRetention) -> bool:
        """The rest of a big run's fold, a step at a time (compact.lua), other clients
        served between them; whether it is done (if not, the run stays active and its next
        forget goes on)."""
        steps = range(MAX_FOLD_STEPS)
        return any(not self.compact(run_id, retention).folding for _ in steps)

    def forget(
        self,
        run_id: str,
        *,
        export_trace: bool = False,
        compaction: EndedRetention | None = None,
    ) -> Forgotten:
        """Drop a run that has ended from the reconciler's set (not if it re-opened),
        after queueing its webhook deliveries and, with ``export_trace``, its trace's
        OTLP export, and giving its scores and node logs the run's time to live; with
        ``compaction``, compacted first (``compact``), in the same round trip; a big
        run's fold takes steps of its own after it (``_fold_on``), the run active meanwhile.

        Four steps, each in one Cluster slot (lua/forget.lua on the run's; the queues;
        the ended runs' set of its status; the active set), in an order a crash cannot
        break: the run leaves the active set last, so the reconciler repeats whatever a
        dead caller left (the repeat queues the same deliveries, ZADD NX, and scores the
        run by the same end). A replay re-opening the run between the first step and the
        removal is seen by a re-read after it, and the run is put back (and taken out of
        the ended set again). On one server the scripts go in one round trip and the
        other steps in a second (a pipeline keeps their order)."""
        keys = self.keys
        shared = (keys.webhook_log(run_id), keys.run_scores(run_id), keys.run_logs(run_id))
        calls = [] if compaction is None else [self._compaction(run_id, compaction)]
        calls.append(("forget", shared, (run_id, "1" if export_trace else "0")))
        fields = named_reply(self._scripts_in_order(run_id, calls)[-1])
        if not int(fields["closed"]):
            # a big run's fold has steps left: the run stays active until they are done
            folding = int(fields.get("folding") or 0)
            if folding and compaction is not None and self._fold_on(run_id, compaction):
                return self.forget(run_id, export_trace=export_trace)
            return Forgotten(False, "")
        now_ms = int(fields["now"])
        steps: list[Callable[[Any], Any]] = []
        if int(fields["export"]):
            steps.append(lambda c: c.zadd(keys.trace_exports, {run_id: now_ms}, nx=True))
        webhooks = [_text(item) for item in fields.get("webhooks") or []]
        if webhooks:
            due = dict.fromkeys(webhooks, now_ms)
            steps.append(lambda c: c.zadd(keys.webhooks_due, due, nx=True))
        ended = _text(fields.get("ended") or "")
        if ended:
            finished_at = {run_id: int(fields["finished_at"])}
            steps.append(lambda c: c.zadd(keys.ended_runs(ended), finished_at))
        steps.append(lambda c: c.srem(keys.active_runs, run_id))
        steps.append(lambda c: c.hget(keys.run_key(run_id, "run"), "status"))
        *_, removed, status = self._in_order(steps)
        if _text(status or "") in OPEN_STATUSES:
            self._reopened(run_id)  # by a replay, meanwhile
            return Forgotten(False, "")
        return Forgotten(bool(removed), _text(fields.get("concurrency_key") or ""))

    def mark_published(self, nodes: list[ReadyNode]) -> None:
        """Confirm publishes, so the reconciler does not publish these nodes again."""
        by_run: dict[str, list[str]] = {}
        for node in nodes:
            by_run.setdefault(node.run_id, []).append(node.node_id)
        if len(by_run) == 1:  # the usual case: no pipeline (building one costs more than a ZREM)
            [(run_id, node_ids)] = by_run.items()
            self.client.zrem(self.keys.run_key(run_id, "outbox"), *node_ids)
            return
        pipe = self.client.pipeline(transaction=False)
        for run_id, node_ids in by_run.items():
            pipe.zrem(self.keys.run_key(run_id, "outbox"), *node_ids)
        pipe.execute()


def pending_member(run_id: str, node_id: str) -> str:
    """A waiting approval's member in the pending-approvals index."""
    return f"{run_id}/{node_id}"


OPEN_STATUSES = frozenset({"running", "planning"})  # prelude.lua is_open


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _flatten(fields: dict[str, str]) -> list[str]:
    return [item for pair in fields.items() for item in pair]


def _ready_nodes(run_id: str, rows: list[list[Any]]) -> list[ReadyNode]:
    return [ReadyNode.from_row(run_id, row) for row in rows]


def _owned(reply: Any) -> bool:
    """The answer of a fenced script that only says whether the node is still ours."""
    return bool(int(named_reply(reply)["owned"]))


def _succeeded(reply: Any) -> bool:
    return bool(named_reply(reply)["status"] == "ok")


def _aged_further(aged: AgedOut, run_id: str, fields: dict[str, Any]) -> AgedOut:
    """``aged`` with a round of lua/age_out.lua (its ``fields``) added."""
    stopped = _stopped_work(run_id, fields)
    return AgedOut(
        str(fields["status"]),
        StoppedWork(
            running=[*aged.stopped.running, *stopped.running],
            queued=[*aged.stopped.queued, *stopped.queued],
        ),
        aged.dead_letters + int(fields["failed"]),
    )


def _stopped_work(run_id: str, fields: dict[str, Any]) -> StoppedWork:
    """The work a stop left (its reply's ``running``, ``queued`` and ``teardown``)."""
    return StoppedWork(
        running=list(fields["running"]),
        queued=_ready_nodes(run_id, fields["queued"]),
        teardown=_ready_nodes(run_id, fields.get("teardown", [])),
        tearing_down=fields.get("tearing_down") == "1",
    )


def _final(status: str) -> RunStatus | None:
    return RunStatus(status) if status else None
