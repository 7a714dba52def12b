"""What a new run writes, as the arguments of lua/create_run.lua, and what it answers.

A submit writes a run in three round trips at most: its idempotency claim (if keyed:
lua/claim_idempotency_key.lua), the run index and the active set (``index_run``) with the
run's plan and node columns staged (``stage_run``), then the run hash and its queued
roots in one script on the run's keys. Each command and script is in one Redis Cluster
slot, and the order makes a crash harmless: a claim whose run never appears is taken
over (control/submission.py), an indexed id without a run is dropped or skipped
(``index_run``), and staged columns without a run expire; a run is never written without
being indexed, nor without its columns.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dagwright.keys import Keys
from dagwright.models import DEFAULT_RUN_IF, Node, NodeStatus, RunStatus
from dagwright.orchestrator.runstate.machine import Dispatch, ReadyNode
from dagwright.redis_scripts import lua_source, named_reply

if TYPE_CHECKING:  # a created run is given its validated plan; reads never import plans
    from dagwright.plans.validation import PlanGraph

PACKAGE = "dagwright.orchestrator.runstate"

# How long a run's staged plan and columns (``stage_run``) live if the run is never
# written (its submitter died in between): create_run.lua makes them the run's, without a
# time to live, in the next round trip.
STAGED_TTL_S = 3600
# Fields a staged column is written with per command: a 10,000-node run's columns are
# some 200 commands, each a fraction of a millisecond, between which the server serves
# every other client (one script writing them all held it ~60 ms).
STAGED_CHUNK = 500

# The run's keys create_run.lua writes, in the order it names them.
CREATE_RUN_KEYS = (
    "run",
    "plan",
    "spec",
    "deps",
    "dependents",
    "remaining",
    "dispatch",
    "state",
    "fence",
    "attempts",
    "queued",
    "outbox",
    "events",
    "run_if",
    "retry",
    "waits",
    "countdown",
)


# The run hash's field saying some node has a countdown (K.countdown): scripts look a ready
# node's up only then (prelude.lua start_node).
COUNTDOWNS_FIELD = "countdowns"
# The run hash's field naming its concurrency key, rendered (run_gates.py): it waits
# for a place of the key before its roots start.
CONCURRENCY_KEY_FIELD = "concurrency_key"

# The run hash's field saying some node has a run_if rule: scripts read a node's rule
# and its skipped dependencies only then, so a run without rules pays nothing for them.
TRIGGER_RULES_FIELD = "trigger_rules"

# The run's randomness its agents' data fences derive from (workers/untrusted.py): never
# shown, so that no node's data can guess another node's tags.
PROMPT_NONCE_FIELD = "prompt_nonce"
# What a keyed submit asked for, hashed (NewRun.request_digest): a later submit with the
# same key and another request is refused instead of being given this run.
REQUEST_DIGEST_FIELD = "request_digest"
# The run's inputs (plans/run_inputs.py), as JSON with sorted keys: given at submit, the
# plan's defaults filled in. In the request digest with the other fields, so a keyed
# submit with other inputs is another request. claim.lua returns it with each claim.
RUN_INPUTS_FIELD = "inputs"
# The run's priority (1 to 5, higher first), kept for people and for re-planners: each
# node's own is in its dispatch, where the scripts and the publish read it.
PRIORITY_FIELD = "priority"
# The schedule that started the run, and how deep a follow-up it is (0: the scheduled run
# itself, n: its n-th follow-up): written by schedules/, read by a node's background.
SCHEDULE_FIELD = "schedule"
DEPTH_FIELD = "followup_depth"


@dataclass(frozen=True)
class KeyClaim:
    """An idempotency key a new run takes, unless it names another run already."""

    key: str  # the Redis key (keys.Keys.idempotency)
    ttl_s: int
    stale_owner: str = ""  # a holder whose run never appeared: taken over


@dataclass(frozen=True)
class Creation:
    """The answer of a create: the run the key names (the new run's id, unless the key
    named another run already), the new run's roots to publish and whether it waits for
    a place of its concurrency key (run_gates.py admits it)."""

    owner: str
    ready: list[ReadyNode]
    gated: bool = False


@dataclass(frozen=True)
class NewRun:
    """A run about to be written: its hash, its plan, its node columns and its roots."""

    fields: dict[str, str]  # the run hash, less created_at (the server's time, set in Lua)
    plan_json: str
    columns: dict[str, dict[str, str]]  # column (a run key name) -> node -> value
    roots: list[str]
    dispatch: dict[str, Dispatch]  # node -> how it is published

    @classmethod
    def of(
        cls,
        graph: PlanGraph,
        dispatch_for: Callable[[Node], Dispatch],
        *,
        status: RunStatus = RunStatus.RUNNING,
        output_nodes: list[str] | None = None,
        extra: dict[str, str | int] | None = None,
    ) -> NewRun:
        plan = graph.plan
        outputs = plan.output_nodes() if output_nodes is None else output_nodes
        counters = (
            "done",
            "running",
            "succeeded",
            "failed",
            "blocked",
            "cancelled",
            "skipped",
            "replaced",
        )
        dispatch = {node.id: dispatch_for(node) for node in plan.nodes}
        columns = _columns(graph, dispatch)
        fields = {
            **{name: str(value) for name, value in (extra or {}).items()},
            "status": status.value,
            "goal": plan.goal,
            "total": str(len(plan.nodes)),
            **dict.fromkeys(counters, "0"),
            "output_nodes": json.dumps(outputs),
            PROMPT_NONCE_FIELD: secrets.token_hex(16),
            **({TRIGGER_RULES_FIELD: "1"} if columns["run_if"] else {}),
            **({COUNTDOWNS_FIELD: "1"} if columns["countdown"] else {}),
        }
        return cls(
            fields=fields,
            plan_json=plan.model_dump_json(exclude_defaults=True),
            columns=columns,
            roots=list(graph.roots),
            dispatch=dispatch,
        )

    def request_digest(self) -> str:
        """A digest of what was asked for: the plan and the run's settings, less what
        each write draws anew (the prompt nonce)."""
        asked = {k: v for k, v in self.fields.items() if k != PROMPT_NONCE_FIELD}
        text = json.dumps([self.plan_json, asked], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def with_request_digest(self) -> NewRun:
        """This run with its request digest among its fields."""
        fields = {**self.fields, REQUEST_DIGEST_FIELD: self.request_digest()}
        return dataclasses.replace(self, fields=fields)

    def to_args(self) -> list[str]:
        """The script's arguments after the stream cap and the run id (its plan and
        columns are staged before: ``stage_run``)."""
        return [json.dumps(self.fields), json.dumps(self.roots)]

    def ready(self, run_id: str, parked: frozenset[str] = frozenset()) -> list[ReadyNode]:
        """The roots, queued under fence 1, to publish, less those ``parked`` (waiting for
        a delayed start or the run's concurrency key)."""
        return [
            ReadyNode(run_id, root, 1, self.dispatch[root])
            for root in self.roots
            if root not in parked
        ]


def key_claims() -> str:
    """lua/idempotency_prelude.lua: what create_run.lua and claim_idempotency_key.lua share."""
    return lua_source(PACKAGE, "idempotency_prelude")


def create_call(
    keys: Keys, run_id: str, new_run: NewRun, events_maxlen: int
) -> tuple[list[str], list[str | int]]:
    """The keys and arguments of lua/create_run.lua writing ``new_run`` as ``run_id``:
    what the sync store and the asyncio one send (after ``index_run``)."""
    names = [keys.run_key(run_id, name) for name in CREATE_RUN_KEYS]
    return names, [events_maxlen, run_id, *new_run.to_args()]


def index_run(pipe: Any, keys: Keys, run_id: str) -> None:
    """Queue on ``pipe`` (not a transaction: two Cluster slots) what puts a run about to
    be written into the run index and the active set. Written before the run: a run
    always has them, so the reconciler publishes its roots if the submitter dies; a
    submitter dying before the run is written leaves ids that name no run, which the
    reconciler drops from the active set (its forget finds no open run) and a listing
    of the index skips, as it skips runs that expired."""
    pipe.zadd(keys.run_index, {run_id: int(time.time() * 1000)})
    pipe.sadd(keys.active_runs, run_id)


def stage_run(pipe: Any, keys: Keys, run_id: str, new_run: NewRun) -> None:
    """Queue on ``pipe`` (not a transaction) the writes of the run's plan and node
    columns, each to expire in ``STAGED_TTL_S`` unless create_run.lua, which checks that
    they are there, makes them the run's. Commands of ``STAGED_CHUNK`` fields, in the
    plan's order: a hash keeps its fields in insertion order, which is the order a run's
    nodes are read back in."""
    plan = keys.run_key(run_id, "plan")
    pipe.set(plan, new_run.plan_json, ex=STAGED_TTL_S)
    for name, column in new_run.columns.items():
        if not column:
            continue
        key = keys.run_key(run_id, name)
        items = list(column.items())
        for first in range(0, len(items), STAGED_CHUNK):
            pipe.hset(key, mapping=dict(items[first : first + STAGED_CHUNK]))
        pipe.expire(key, STAGED_TTL_S)


def creation_of(run_id: str, new_run: NewRun, reply: object) -> Creation:
    """What lua/create_run.lua answered: the run the key names, and the roots to publish
    if that is the new run (none if the key named another run: nothing was written)."""
    fields = named_reply(reply)
    owner = str(fields["owner"])
    if owner != run_id:
        return Creation(owner, [])
    parked = frozenset(str(node) for node in fields.get("parked") or [])
    gated = CONCURRENCY_KEY_FIELD in new_run.fields
    return Creation(owner, new_run.ready(run_id, parked), gated)


def _columns(graph: PlanGraph, dispatch: dict[str, Dispatch]) -> dict[str, dict[str, str]]:
    nodes = graph.plan.nodes
    return {
        "spec": {n.id: n.model_dump_json(exclude_defaults=True) for n in nodes},
        "deps": {n.id: json.dumps(n.depends_on) for n in nodes},
        "dependents": {nid: json.dumps(children) for nid, children in graph.dependents.items()},
        "remaining": {n.id: str(len(n.depends_on)) for n in nodes},
        "dispatch": {nid: value.to_json() for nid, value in dispatch.items()},
        "state": dict.fromkeys(dispatch, NodeStatus.PENDING.value),
        "fence": dict.fromkeys(dispatch, "0"),
        "attempts": dict.fromkeys(dispatch, "0"),
        "run_if": {n.id: n.run_if for n in nodes if n.run_if != DEFAULT_RUN_IF},
        "countdown": {n.id: str(round(n.countdown_s * 1000)) for n in nodes if n.countdown_s},
    }
