"""``AsyncClient``: the run lifecycle for asyncio applications, over ``redis.asyncio``.

::

    async with AsyncClient() as client:
        run = await client.submit(plan)
        async for event in run.events():
            print(event.kind, event.node)
        print(await run.result(timeout=60))

Native: status, counts, wait, result, events, next_events, get_run, list_runs, score and
scores send their commands on ``redis.asyncio`` (orchestrator/runstate/async_store.py,
runstate/scores.py) and decode the replies with the sync store's functions
(runstate/snapshots.py, runstate/scores.py); events follow the sync
follower's rule (client/following.py ``FollowCursor``) and a wait's timeout is the same
error (client/handle.py ``still_running``). ``submit`` awaits the create-run script, its
keys and arguments built by the sync store's ``create_call`` (runstate/creation.py).

In a thread (``asyncio.to_thread``): ``submit``'s checks (``Client.run_request`` and
``prepare_run``: reading a plan file, validation, a goal's planner request, the live
workers' capabilities over the sync Redis client) and its publish to Celery (kombu is
synchronous); a keyed submit (``idempotency_key``) whole; which queued nodes of a
status wait for a worker (``Client.worker_waits``, only when some node is queued);
``cancel`` (the cancel script, then revoking messages through Celery) and ``find_runs``
(paged scans of the run index), on the sync ``Client``. One rule each, not a second copy.

A client belongs to the event loop it is first used on (redis-py's asyncio pool does):
make it inside ``asyncio.run``'s coroutine and ``aclose()`` it (or ``async with``).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from dagwright.client.following import FollowCursor
from dagwright.client.handle import ProgressCallback, result_of, still_running
from dagwright.client.redis_errors import ConnectedPart
from dagwright.client.run_options import RunOptions, check_run_options
from dagwright.client.runs import (
    PROGRESS_INTERVAL_S,
    SAFETY_WAKE_UP_S,
    WAKE_UP_S,
    Client,
)
from dagwright.connection import connect_async
from dagwright.keys import Keys
from dagwright.models import Event, NodeLogLine, Plan, RunCounts, RunScore, RunState, RunStatus
from dagwright.orchestrator.runstate.async_store import AsyncRunStore
from dagwright.orchestrator.runstate.node_logs import DEFAULT_LIMIT, AsyncNodeLogs
from dagwright.orchestrator.runstate.scores import AsyncRunScores
from dagwright.settings import Settings

if TYPE_CHECKING:
    from types import TracebackType

    import redis.asyncio

    from dagwright.client.memory import AsyncMemoryClient
    from dagwright.client.run_pages import RunPage
    from dagwright.orchestrator.control.run_request import RunRequest
    from dagwright.orchestrator.runstate.creation import NewRun


class AsyncClient(ConnectedPart):
    """``Client``'s run methods as coroutines; ``events`` an async iterator.

    ``cancel``, ``find_runs`` and a keyed ``submit`` run the sync client's in a thread,
    and ``submit`` checks and publishes its plan in one (see the module docstring);
    everything else is native asyncio.
    """

    def __init__(self, settings: Settings | None = None) -> None:
        self.sync = Client(settings)
        """The sync client the threaded methods call (its own connection pool)."""
        self.settings = self.sync.settings
        self.redis_url = self.sync.redis_url

    @cached_property
    def redis(self) -> redis.asyncio.Redis:
        return connect_async(self.redis_url, self.settings.redis)

    @cached_property
    def store(self) -> AsyncRunStore:
        return AsyncRunStore(
            self.redis,
            Keys(self.settings.redis.key_prefix),
            events_maxlen=self.settings.retention.events_maxlen,
        )

    @cached_property
    def memory(self) -> AsyncMemoryClient:
        """Memory namespaces, as ``Client.memory`` (each call in a thread)."""
        from dagwright.client.memory import AsyncMemoryClient

        return AsyncMemoryClient(self.sync.memory)

    @cached_property
    def run_scores(self) -> AsyncRunScores:
        return AsyncRunScores(
            self.redis,
            Keys(self.settings.redis.key_prefix),
            max_scores=self.settings.retention.run_scores_max,
        )

    @cached_property
    def node_logs(self) -> AsyncNodeLogs:
        return AsyncNodeLogs(self.redis, Keys(self.settings.redis.key_prefix))

    async def aclose(self) -> None:
        """Close the asyncio connections."""
        if "redis" in self.__dict__:
            await self.redis.aclose()  # type: ignore[attr-defined]  # stubs predate redis 5

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def submit(
        self,
        plan: RunRequest | Plan | dict[str, Any] | str | Path | None = None,
        *,
        idempotency_key: str | None = None,
        **options: Unpack[RunOptions],
    ) -> AsyncRunHandle:
        """``Client.submit``: the same arguments (``options``: goal, inputs, budget,
        webhooks...), the same checks and errors, the same script writing the run.

        Checking the plan (which may read a file, build the worker registry and ask Redis
        which workers are live) and publishing its roots to Celery run in a thread; the
        create-run script is awaited here. A keyed submit (``idempotency_key``), which may
        wait for an earlier submitter, runs ``Client.submit`` in a thread whole."""
        check_run_options("AsyncClient.submit", options)
        if idempotency_key is not None:
            keyed = functools.partial(self.sync.submit, idempotency_key=idempotency_key)
            handle = await asyncio.to_thread(keyed, plan, **options)
            return AsyncRunHandle(self, handle.run_id, created=handle.created)
        from dagwright.orchestrator.control.submission import publish_roots
        from dagwright.orchestrator.runstate.store import new_run_id

        new_run = await asyncio.to_thread(self._prepare, plan, options)
        run_id = new_run_id()
        creation = await self.store.create_run(run_id, new_run)
        # in the thread too: the first publish builds the Celery app (imports and all)
        await asyncio.to_thread(
            lambda: publish_roots(
                self.sync.runtime, self.sync.broker, run_id, creation.ready, gated=creation.gated
            )
        )
        return AsyncRunHandle(self, run_id)

    def _prepare(
        self, plan: RunRequest | Plan | dict[str, Any] | str | Path | None, options: RunOptions
    ) -> NewRun:
        """The checked run a submit writes (its RunRequest, ``prepare_run``), for a thread."""
        from dagwright.orchestrator.control.submission import prepare_run

        request = self.sync.run_request(plan, caller="AsyncClient.submit", **options)
        return prepare_run(self.sync.runtime, request, live_workers=self.sync.live_workers)

    async def get_run(self, run_id: str) -> AsyncRunHandle:
        """A handle on an existing run (UnknownRunError if there is none)."""
        await self.store.run_status(run_id)
        return AsyncRunHandle(self, run_id)

    async def status(self, run_id: str, *, include_outputs: bool = True) -> RunState:
        """A snapshot of the run and its nodes (outputs and result too, unless told not to);
        a queued node no live worker serves says so (``Client.status``'s rule, in a thread)."""
        from dagwright.orchestrator.control.worker_waits import queued_without_wait

        state = await self.store.read_state(run_id, include_outputs=include_outputs)
        if not queued_without_wait(state):
            return state
        return await asyncio.to_thread(self.sync.worker_waits.annotate, state)

    async def counts(self, run_id: str) -> tuple[RunStatus, RunCounts]:
        return await self.store.counts(run_id)

    async def wait(
        self,
        run_id: str,
        timeout: float | None = None,
        *,
        on_progress: ProgressCallback | None = None,
    ) -> RunState:
        """Until the run is final (RunNotFinishedError after ``timeout`` s), blocking on
        its ``done`` stream as ``Client.wait`` does, without blocking the event loop."""
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = PROGRESS_INTERVAL_S if on_progress else SAFETY_WAKE_UP_S
        while True:
            status, counts = await self.store.counts(run_id)
            if on_progress is not None:
                on_progress(status, counts)
            if status.is_final:
                return await self.store.read_state(run_id)
            remaining = interval if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                raise still_running(run_id, status, counts, timeout)
            await self.store.wait_until_done(run_id, min(remaining, interval))

    async def result(self, run_id: str, timeout: float | None = None) -> Any:
        """Wait for the run and return its result, or raise RunFailedError/RunCancelledError."""
        return result_of(await self.wait(run_id, timeout))

    async def events(
        self, run_id: str, *, follow: bool = True, after: str = "0"
    ) -> AsyncIterator[Event]:
        """The run's events from the start (or after stream id ``after``), as ``async for``
        iterates them; with ``follow``, until the run has ended (``Client.events``'
        rule: blocking reads of at most WAKE_UP_S). UnknownRunError at the first step."""
        await self.store.run_status(run_id)
        position = FollowCursor(after)
        while not position.finished:
            batch = await self.store.read_events(
                run_id,
                after=position.cursor,
                block_ms=position.block_ms(WAKE_UP_S if follow else None),
            )
            if position.took(batch):
                position.saw_final((await self.store.run_status(run_id)).is_final)
            for event in batch:
                yield event
            if not batch and not follow:
                return

    async def next_events(
        self, run_id: str, *, after: str = "$", wait_s: float = WAKE_UP_S
    ) -> list[Event]:
        """The run's events after stream id ``after`` in one batch, waiting up to
        ``wait_s`` for the first (``Client.next_events``)."""
        block_ms = max(1, int(wait_s * 1000))
        return await self.store.read_events(run_id, after=after, block_ms=block_ms)

    async def cancel(self, run_id: str, reason: str = "cancelled by a user") -> RunState:
        """``Client.cancel``, run in a thread (its revokes go through Celery)."""
        return await asyncio.to_thread(self.sync.cancel, run_id, reason)

    async def list_runs(self, limit: int = 20) -> list[RunState]:
        """The most recent runs, newest first, as summaries (no nodes)."""
        return [
            await self.store.read_state(run_id, include_nodes=False)
            for run_id in await self.store.list_runs(limit)
            if await self.store.exists(run_id)
        ]

    async def score(
        self,
        run_id: str,
        name: str,
        value: float | bool,
        comment: str | None = None,
        *,
        source: str = "client",
        by: str | None = None,
    ) -> RunScore:
        """``Client.score``: the same checks, errors and script."""
        from dagwright.client.scoring import new_score

        given = new_score(name, value, comment, source=source, by=by)
        return await self.run_scores.add(run_id, given)

    async def scores(self, run_id: str) -> list[RunScore]:
        """``Client.scores``: every score of the run, oldest first."""
        return await self.run_scores.read(run_id)

    async def logs(
        self,
        run_id: str,
        node: str | None = None,
        after: str | None = None,
        *,
        limit: int = DEFAULT_LIMIT,
    ) -> list[NodeLogLine]:
        """``Client.logs``: the run's node log lines after the cursor, oldest first."""
        return await self.node_logs.read(run_id, node, after, limit)

    async def find_runs(self, **where: Any) -> RunPage:
        """``Client.find_runs`` (status, text, limit, cursor), run in a thread."""
        return await asyncio.to_thread(lambda: self.sync.find_runs(**where))


class AsyncRunHandle:
    """One run, for asyncio: ``await status()``, ``wait()``, ``result()``, ``cancel()``;
    ``async for event in events()``."""

    def __init__(self, client: AsyncClient, run_id: str, *, created: bool = True) -> None:
        self.client = client
        self.run_id = run_id
        self.created = created
        """False when a submit's idempotency key named a run started earlier."""

    def __repr__(self) -> str:
        return f"AsyncRunHandle({self.run_id!r})"

    async def status(self) -> RunState:
        return await self.client.status(self.run_id)

    async def wait(
        self, timeout: float | None = None, *, on_progress: ProgressCallback | None = None
    ) -> RunState:
        return await self.client.wait(self.run_id, timeout, on_progress=on_progress)

    async def result(self, timeout: float | None = None) -> Any:
        return await self.client.result(self.run_id, timeout)

    def events(self, *, follow: bool = True, after: str = "0") -> AsyncIterator[Event]:
        return self.client.events(self.run_id, follow=follow, after=after)

    async def cancel(self, reason: str = "cancelled by a user") -> RunState:
        return await self.client.cancel(self.run_id, reason)
