"""Creating runs and reading them back: snapshots and the event stream."""

from __future__ import annotations

import functools
import json
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import redis

from dagwright.errors import UnknownRunError
from dagwright.keys import Keys
from dagwright.models import (
    AuditEntry,
    ErrorInfo,
    Event,
    Node,
    NodeState,
    NodeStatus,
    NodeWait,
    RunCounts,
    RunState,
    RunStatus,
    Usage,
    event_of,
    from_ms,
)
from dagwright.orchestrator.runstate.creation import (
    CREATE_RUN_KEYS,
    REQUEST_DIGEST_FIELD,
    RUN_INPUTS_FIELD,
    Creation,
    KeyClaim,
    NewRun,
)
from dagwright.orchestrator.runstate.machine import Dispatch, ReadyNode
from dagwright.redis_scripts import load_script, lua_source, named_reply
from dagwright.workers.budgets import budget_of_run

if TYPE_CHECKING:  # a created run is given its validated plan; reads never import plans
    from dagwright.plans.validation import PlanGraph

PACKAGE = "dagwright.orchestrator.runstate"
_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def new_run_id() -> str:
    """A 20-character id that sorts by creation time (48-bit ms clock + 52 random bits)."""
    value = (int(time.time() * 1000) << 52) | secrets.randbits(52)
    chars = []
    for _ in range(20):
        value, digit = divmod(value, 32)
        chars.append(_CROCKFORD[digit])
    return "".join(reversed(chars))


class RunStore:
    def __init__(self, client: redis.Redis, keys: Keys, *, events_maxlen: int) -> None:
        self.client = client
        self.keys = keys
        self.events_maxlen = events_maxlen
        claims = functools.partial(lua_source, PACKAGE, "key_claim")
        self._create_run = load_script(client, PACKAGE, "create_run", prelude=claims)
        self._claim_key = load_script(client, PACKAGE, "claim_key", prelude=claims)

    def server_time_ms(self) -> int:
        seconds, micros = self.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def create_run(
        self,
        run_id: str,
        graph: PlanGraph,
        dispatch: Callable[[Node], Dispatch],
        *,
        status: RunStatus = RunStatus.RUNNING,
        output_nodes: list[str] | None = None,
        extra: dict[str, str | int] | None = None,
    ) -> list[ReadyNode]:
        """Write a run and queue its root nodes, atomically. Returns the roots to publish."""
        new_run = NewRun.of(graph, dispatch, status=status, output_nodes=output_nodes, extra=extra)
        return self.create_claimed_run(run_id, new_run).ready

    def create_claimed_run(
        self, run_id: str, new_run: NewRun, claim: KeyClaim | None = None
    ) -> Creation:
        """Write a run and queue its root nodes in one step (lua/create_run.lua), unless
        ``claim``'s key names another run already: then nothing is written.

        The run joins the active set in the same step: if this process dies before
        publishing, the reconciler still finds the queued roots and publishes them.
        """
        keys = [self._key(run_id, name) for name in CREATE_RUN_KEYS]
        keys += [self.keys.run_index, self.keys.active_runs]
        args: list[str | int] = [self.events_maxlen, run_id, *new_run.to_args()]
        if claim is not None:
            keys.append(claim.key)
            args += [claim.ttl_s, claim.stale_owner]
        owner = str(named_reply(self._create_run(keys=keys, args=args))["owner"])
        if owner != run_id:
            return Creation(owner, [])
        return Creation(owner, new_run.ready(run_id))

    def claim_key(self, claim: KeyClaim, run_id: str) -> str:
        """Take an idempotency key for ``run_id`` alone (lua/claim_key.lua), unless it
        names another run already; the run it names now."""
        reply = self._claim_key(keys=[claim.key], args=[run_id, claim.ttl_s, claim.stale_owner])
        return str(named_reply(reply)["owner"])

    def _key(self, run_id: str, name: str) -> str:
        return self.keys.run_key(run_id, name)

    def exists(self, run_id: str) -> bool:
        return bool(self.client.exists(self._key(run_id, "run")))

    def request_digest(self, run_id: str) -> str | None:
        """The digest of the request a keyed submit started the run with ("" for a run
        written without one); None if there is no such run (yet)."""
        status, digest = self.client.hmget(
            self._key(run_id, "run"), ["status", REQUEST_DIGEST_FIELD]
        )
        if status is None:
            return None
        return digest or ""

    def run_status(self, run_id: str) -> RunStatus:
        status = self.client.hget(self._key(run_id, "run"), "status")
        if status is None:
            raise UnknownRunError(run_id)
        return RunStatus(status)

    def counts(self, run_id: str) -> tuple[RunStatus, RunCounts]:
        """Status and node counts: one HGETALL, cheap enough to poll for progress."""
        run = self.client.hgetall(self._key(run_id, "run"))
        if not run:
            raise UnknownRunError(run_id)
        return RunStatus(run["status"]), _counts(run)

    def waits(self, run_id: str) -> dict[str, NodeWait]:
        """What each parked node of the run waits on (a breaker, a slot): one or two round trips,
        for progress lines that poll."""
        raw = self.client.hgetall(self._key(run_id, "waits"))
        if not raw:
            return {}
        states = self.client.hmget(self._key(run_id, "state"), list(raw))
        found = {
            node_id: _wait(NodeStatus(state), raw[node_id])
            for node_id, state in zip(raw, states, strict=True)
            if state is not None
        }
        return {node_id: wait for node_id, wait in found.items() if wait is not None}

    def read_state(
        self, run_id: str, *, include_nodes: bool = True, include_outputs: bool = True
    ) -> RunState:
        """A snapshot of the run and every node (a few HGETALLs, whatever the size).

        Without nodes it reads only the run's hash (a summary: status, counts, goal); without
        outputs it leaves node outputs and the result out.
        """
        columns = _state_columns(include_nodes, include_outputs)
        pipe = self.client.pipeline(transaction=True)
        for name in columns:
            pipe.hgetall(self._key(run_id, name))
        return _state(run_id, dict(zip(columns, pipe.execute(), strict=True)))

    def read_with_streams(
        self, run_id: str, streams: tuple[str, ...]
    ) -> tuple[RunState, list[list[tuple[str, dict[str, str]]]], datetime]:
        """A snapshot of the run (node outputs left out), every entry of its ``streams``
        (run key names) and the server's time, all read at one instant in one round trip."""
        columns = _state_columns(include_nodes=True, include_outputs=False)
        pipe = self.client.pipeline(transaction=True)
        for name in columns:
            pipe.hgetall(self._key(run_id, name))
        for name in streams:
            pipe.xrange(self._key(run_id, name))
        pipe.time()
        replies = pipe.execute()
        state = _state(run_id, dict(zip(columns, replies, strict=False)))
        seconds, micros = replies[-1]
        now = datetime.fromtimestamp(int(seconds) + int(micros) / 1e6, tz=UTC)
        return state, replies[len(columns) : -1], now

    def read_events(
        self, run_id: str, *, after: str = "0", block_ms: int | None = None, count: int = 1000
    ) -> list[Event]:
        """Events after the stream id ``after``; blocks up to ``block_ms`` for new ones."""
        streams = self.client.xread(
            {self._key(run_id, "events"): after}, count=count, block=block_ms
        )
        if not streams:
            return []
        [(_stream, entries)] = streams  # one stream asked, one answered
        return [event_of(run_id, entry_id, fields) for entry_id, fields in entries]

    def read_audit(self, run_id: str, count: int = 10_000) -> list[AuditEntry]:
        """The run's tool-policy decisions, oldest first."""
        self.run_status(run_id)
        entries = self.client.xrange(self._key(run_id, "audit"), count=count)
        return [
            AuditEntry(id=entry_id, at=from_ms(entry_id.split("-")[0]), **fields)
            for entry_id, fields in entries
        ]

    def wait_until_done(self, run_id: str, timeout_s: float) -> bool:
        """Block until the run has ended or ``timeout_s`` passed; True if it has ended."""
        block_ms = max(1, int(timeout_s * 1000))
        return bool(self.client.xread({self._key(run_id, "done"): "0"}, count=1, block=block_ms))

    def list_runs(self, limit: int = 20) -> list[str]:
        """The most recent run ids, newest first."""
        return list(self.client.zrevrange(self.keys.run_index, 0, limit - 1))

    def run_index_page(self, max_ms: float | str, count: int) -> list[tuple[str, float]]:
        """Up to ``count`` (run id, creation ms) of the run index created at ``max_ms`` or
        before (``"+inf"``: from the newest), newest first."""
        return [
            (str(run_id), float(score))
            for run_id, score in self.client.zrevrangebyscore(
                self.keys.run_index, max_ms, "-inf", start=0, num=count, withscores=True
            )
        ]

    def node_records(self, run_id: str, node_id: str) -> tuple[str | None, str | None]:
        """A node's spec and last checkpoint, as stored (JSON text, or None)."""
        pipe = self.client.pipeline(transaction=True)
        pipe.hget(self._key(run_id, "spec"), node_id)
        pipe.hget(self._key(run_id, "checkpoint"), node_id)
        spec, checkpoint = pipe.execute()
        return spec, checkpoint


def _state_columns(include_nodes: bool, include_outputs: bool) -> list[str]:
    columns = ["run"]
    if include_nodes:
        columns += ["state", "spec", "attempts", "started", "finished", "error", "usage", "waits"]
    if include_nodes and include_outputs:
        columns.append("output")
    return columns


def _state(run_id: str, data: dict[str, dict[str, str]]) -> RunState:
    """A run's state from its hashes, as read by ``_state_columns``."""
    run = data["run"]
    if not run:
        raise UnknownRunError(run_id)
    nodes = {node_id: _node_state(node_id, data) for node_id in data.get("state", {})}
    output_nodes = json.loads(run["output_nodes"])
    status = RunStatus(run["status"])
    with_result = status == RunStatus.SUCCEEDED and "output" in data
    return RunState(
        run_id=run_id,
        status=status,
        goal=run.get("goal", ""),
        created_at=from_ms(run["created_at"]),
        finished_at=from_ms(run.get("finished_at")),
        counts=_counts(run),
        output_nodes=output_nodes,
        nodes=nodes,
        result=_result(output_nodes, nodes) if with_result else None,
        usage=_run_usage(run),
        budget=budget_of_run(run),
        reason=run.get("stop_reason"),
        response_cache=run.get("response_cache") == "1",
        inputs=json.loads(run.get(RUN_INPUTS_FIELD) or "{}"),
    )


def _run_usage(run: dict[str, str]) -> Usage:
    """The run's totals, kept in its hash by progress.lua (absent until an LLM call)."""
    return Usage(
        **{
            field: float(run[field]) if field == "cost_usd" else int(run[field])
            for field in Usage.model_fields
            if field in run
        }
    )


def _counts(run: dict[str, str]) -> RunCounts:
    return RunCounts(**{field: int(run.get(field, 0)) for field in RunCounts.model_fields})


def _node_state(node_id: str, data: dict[str, dict[str, str]]) -> NodeState:
    spec = json.loads(data["spec"][node_id])
    error = data["error"].get(node_id)
    raw_output = data.get("output", {}).get(node_id)
    raw_usage = data["usage"].get(node_id)
    status = NodeStatus(data["state"][node_id])
    return NodeState(
        status=status,
        type=spec["type"],
        depends_on=spec.get("depends_on", []),
        attempts=int(data["attempts"].get(node_id, 0)),
        started_at=from_ms(data["started"].get(node_id)),
        finished_at=from_ms(data["finished"].get(node_id)),
        output=json.loads(raw_output) if raw_output is not None else None,
        error=ErrorInfo.model_validate_json(error) if error else None,
        usage=Usage.model_validate_json(raw_usage) if raw_usage else Usage(),
        waiting=_wait(status, data.get("waits", {}).get(node_id)),
    )


# The state a node is in while it waits on each kind of thing.
WAITING_STATUS = {"breaker": NodeStatus.RETRY_WAIT, "slot": NodeStatus.QUEUED}


def _wait(status: NodeStatus, raw: str | None) -> NodeWait | None:
    """What a parked node waits on (retry.lua and park.lua keep it; a node that moved on
    is no longer in the state of its wait, and has none)."""
    if raw is None:
        return None
    wait = json.loads(raw)
    if WAITING_STATUS.get(wait["on"]) != status:
        return None
    until_ms = wait.get("until_ms")
    return NodeWait(
        on=wait["on"],
        name=wait["name"],
        since=datetime.fromtimestamp(wait["since_ms"] / 1000, tz=UTC),
        until=datetime.fromtimestamp(until_ms / 1000, tz=UTC) if until_ms else None,
        last_failure=wait.get("last_failure") or "",
    )


def _result(output_nodes: list[str], nodes: dict[str, NodeState]) -> Any:
    """One output node: its output. Several: their outputs keyed by node id."""
    if len(output_nodes) == 1:
        return nodes[output_nodes[0]].output
    return {node_id: nodes[node_id].output for node_id in output_nodes}
