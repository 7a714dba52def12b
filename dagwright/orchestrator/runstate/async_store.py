"""Runs over ``redis.asyncio``: the asyncio twin of the store's reads and of its write
of a new run.

Each method sends the same commands as its namesake of ``RunStore``, built and decoded
by the same functions (snapshots.py for reads, creation.py's ``create_call`` and
``creation_of`` for the create-run script), so the two clients cannot disagree on what
a run's hashes or events mean, nor on what a submit writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagwright.keys import Keys
from dagwright.models import Event, RunCounts, RunState, RunStatus
from dagwright.orchestrator.runstate.creation import (
    PACKAGE,
    Creation,
    NewRun,
    create_call,
    creation_of,
    index_run,
    stage_run,
)
from dagwright.orchestrator.runstate.snapshots import (
    counts_of,
    events_of,
    folded_split,
    state_columns,
    state_of,
    status_of,
)
from dagwright.redis_scripts import load_script

if TYPE_CHECKING:
    import redis.asyncio


class AsyncRunStore:
    """What an asyncio client needs of the store: status, counts, snapshots, events, the
    index, and writing a new run."""

    def __init__(self, client: redis.asyncio.Redis, keys: Keys, *, events_maxlen: int) -> None:
        self.client = client
        self.keys = keys
        self.events_maxlen = events_maxlen
        self._create_run = load_script(client, PACKAGE, "create_run")

    async def create_run(self, run_id: str, new_run: NewRun) -> Creation:
        """Write a run and queue its roots in one step, as ``RunStore.create_claimed_run``
        (without an idempotency key: a keyed submit goes through the sync client)."""
        async with self.client.pipeline(transaction=False) as pipe:
            index_run(pipe, self.keys, run_id)
            stage_run(pipe, self.keys, run_id, new_run)
            await pipe.execute()
        keys, args = create_call(self.keys, run_id, new_run, self.events_maxlen)
        return creation_of(run_id, new_run, await self._create_run(keys=keys, args=args))

    def _key(self, run_id: str, name: str) -> str:
        return self.keys.run_key(run_id, name)

    async def exists(self, run_id: str) -> bool:
        return bool(await self.client.exists(self._key(run_id, "run")))

    async def run_status(self, run_id: str) -> RunStatus:
        return status_of(run_id, await self.client.hget(self._key(run_id, "run"), "status"))

    async def counts(self, run_id: str) -> tuple[RunStatus, RunCounts]:
        return counts_of(run_id, await self.client.hgetall(self._key(run_id, "run")))

    async def read_state(
        self, run_id: str, *, include_nodes: bool = True, include_outputs: bool = True
    ) -> RunState:
        """A snapshot of the run (see ``RunStore.read_state``), in one transaction."""
        columns = state_columns(include_nodes, include_outputs)
        async with self.client.pipeline(transaction=True) as pipe:
            for name in columns:
                pipe.hgetall(self._key(run_id, name))
            if include_nodes:  # a compacted run's folded columns
                pipe.get(self._key(run_id, "nodes"))
            replies = await pipe.execute()
        return state_of(run_id, columns, *folded_split(replies, len(columns)))

    async def read_events(
        self, run_id: str, *, after: str = "0", block_ms: int | None = None, count: int = 1000
    ) -> list[Event]:
        """Events after the stream id ``after``; blocks up to ``block_ms`` for new ones."""
        streams = await self.client.xread(
            {self._key(run_id, "events"): after}, count=count, block=block_ms
        )
        return events_of(run_id, streams)

    async def wait_until_done(self, run_id: str, timeout_s: float) -> bool:
        """Block until the run has ended or ``timeout_s`` passed; True if it has ended."""
        block_ms = max(1, int(timeout_s * 1000))
        done = await self.client.xread({self._key(run_id, "done"): "0"}, count=1, block=block_ms)
        return bool(done)

    async def list_runs(self, limit: int = 20) -> list[str]:
        """The most recent run ids, newest first."""
        return list(await self.client.zrevrange(self.keys.run_index, 0, limit - 1))
