"""Creating runs and reading them back: snapshots and the event stream."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import redis

from dagwright.keys import Keys
from dagwright.models import (
    AuditEntry,
    Event,
    Node,
    NodeWait,
    RunCounts,
    RunState,
    RunStatus,
    from_ms,
)
from dagwright.orchestrator.runstate.creation import (
    REQUEST_DIGEST_FIELD,
    Creation,
    KeyClaim,
    NewRun,
    create_call,
    creation_of,
    index_run,
    key_claims,
    stage_run,
)
from dagwright.orchestrator.runstate.machine import Dispatch, ReadyNode
from dagwright.orchestrator.runstate.replan_reading import (
    REPLAN_COLUMNS,
    ReplanReading,
    replan_reading_of,
    replans_left,
)
from dagwright.orchestrator.runstate.snapshots import (
    counts_of,
    events_of,
    folded_split,
    state_columns,
    state_of,
    status_of,
    waits_of,
)
from dagwright.redis_scripts import load_script, named_reply

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
        self._create_run = load_script(client, PACKAGE, "create_run")
        self._claim_key = load_script(client, PACKAGE, "claim_idempotency_key", prelude=key_claims)

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

        The key is claimed first and the run joins the index and the active set before
        it is written (``index_run``): if this process dies before publishing, the
        reconciler still finds the queued roots and publishes them. Its plan and columns
        are staged in the same round trip (``stage_run``): a big run's are many short
        commands, not one long script.
        """
        if claim is not None and (owner := self.claim_key(claim, run_id)) != run_id:
            return Creation(owner, [])
        pipe = self.client.pipeline(transaction=False)
        index_run(pipe, self.keys, run_id)
        stage_run(pipe, self.keys, run_id, new_run)
        pipe.execute()
        keys, args = create_call(self.keys, run_id, new_run, self.events_maxlen)
        return creation_of(run_id, new_run, self._create_run(keys=keys, args=args))

    def claim_key(self, claim: KeyClaim, run_id: str) -> str:
        """Take an idempotency key for ``run_id`` alone (lua/claim_idempotency_key.lua), unless it
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
        return status_of(run_id, self.client.hget(self._key(run_id, "run"), "status"))

    def running_nodes(self, run_ids: list[str]) -> list[int]:
        """How many nodes each run has running now, in one round trip (0 for a run not
        found: "" names a message that is not a node's)."""
        pipe = self.client.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.hget(self._key(run_id, "run"), "running")
        return [int(found or 0) for found in pipe.execute()]

    def counts(self, run_id: str) -> tuple[RunStatus, RunCounts]:
        """Status and node counts: one HGETALL, cheap enough to poll for progress."""
        return counts_of(run_id, self.client.hgetall(self._key(run_id, "run")))

    def waits(self, run_id: str) -> dict[str, NodeWait]:
        """What each parked node of the run waits on (a breaker, a slot): one or two round trips,
        for progress lines that poll."""
        raw = self.client.hgetall(self._key(run_id, "waits"))
        if not raw:
            return {}
        states = self.client.hmget(self._key(run_id, "state"), list(raw))
        run = None
        if any('"concurrency"' in wait for wait in raw.values()):  # its numbers: the run's
            fields = ("concurrency_limit", "gate_held")
            values = self.client.hmget(self._key(run_id, "run"), list(fields))
            run = {name: value for name, value in zip(fields, values, strict=True) if value}
        return waits_of(raw, states, run)

    def read_state(
        self, run_id: str, *, include_nodes: bool = True, include_outputs: bool = True
    ) -> RunState:
        """A snapshot of the run and every node (a few HGETALLs, whatever the size).

        Without nodes it reads only the run's hash (a summary: status, counts, goal); without
        outputs it leaves node outputs and the result out.
        """
        columns = state_columns(include_nodes, include_outputs)
        pipe = self.client.pipeline(transaction=True)
        for name in columns:
            pipe.hgetall(self._key(run_id, name))
        if include_nodes:  # a compacted run's folded columns
            pipe.get(self._key(run_id, "nodes"))
        replies = pipe.execute()
        return state_of(run_id, columns, *folded_split(replies, len(columns)))

    def read_with_streams(
        self, run_id: str, streams: tuple[str, ...]
    ) -> tuple[RunState, list[list[tuple[str, dict[str, str]]]], datetime]:
        """A snapshot of the run (node outputs left out) and every entry of its
        ``streams`` (run key names), read at one instant in one transaction, and the
        server's time just after (a Cluster refuses TIME in a transaction)."""
        columns = state_columns(include_nodes=True, include_outputs=False)
        pipe = self.client.pipeline(transaction=True)
        for name in columns:
            pipe.hgetall(self._key(run_id, name))
        pipe.get(self._key(run_id, "nodes"))  # a compacted run's folded columns
        for name in streams:
            pipe.xrange(self._key(run_id, name))
        replies = pipe.execute()
        state = state_of(run_id, columns, replies[: len(columns)], replies[len(columns)])
        seconds, micros = self.client.time()
        now = datetime.fromtimestamp(int(seconds) + int(micros) / 1e6, tz=UTC)
        return state, [_entries(reply) for reply in replies[len(columns) + 1 :]], now

    def read_events(
        self, run_id: str, *, after: str = "0", block_ms: int | None = None, count: int = 1000
    ) -> list[Event]:
        """Events after the stream id ``after``; blocks up to ``block_ms`` for new ones."""
        streams = self.client.xread(
            {self._key(run_id, "events"): after}, count=count, block=block_ms
        )
        return events_of(run_id, streams)

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

    def checkpoints_kept(self, run_id: str) -> str | None:
        """The run hash's ``checkpoints`` (compact.lua): 'dropped', the epoch ms they
        expire, or None (kept as long as the run)."""
        value = self.client.hget(self._key(run_id, "run"), "checkpoints")
        return None if value is None else str(value)

    def replan_reading(self, run_id: str) -> ReplanReading | None:
        """What re-planning a failed branch of the run needs, read at one instant; None
        (after one HGETALL) for a run that cannot re-plan: a plan's run, or a goal run
        whose re-plans are used up."""
        run = self.client.hgetall(self._key(run_id, "run"))
        if not replans_left(run):
            return None
        pipe = self.client.pipeline(transaction=True)
        for name in REPLAN_COLUMNS:
            pipe.hgetall(self._key(run_id, name))
        return replan_reading_of(run, pipe.execute())

    def node_specs(self, run_id: str, node_ids: list[str]) -> list[dict[str, Any]]:
        """The stored specs (decoded) of those of ``node_ids`` the run has, in that order."""
        if not node_ids:
            return []
        specs = self.client.hmget(self._key(run_id, "spec"), node_ids)
        return [json.loads(spec) for spec in specs if spec]


def _entries(reply: list[Any]) -> list[tuple[str, dict[str, str]]]:
    """A stream's XRANGE reply with each entry's fields as a dict: redis-py's cluster
    transaction leaves them the flat list the server sent (no response callback)."""
    return [(entry_id, _as_dict(fields)) for entry_id, fields in reply]


def _as_dict(fields: dict[str, str] | list[str]) -> dict[str, str]:
    if isinstance(fields, dict):
        return fields
    return dict(zip(fields[::2], fields[1::2], strict=True))
