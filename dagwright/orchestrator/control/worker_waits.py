"""Saying why a queued node waits when no live worker serves its queue.

A run accepted while no worker is alive (a deployment starting up), or whose node goes
to a queue no live worker consumes (``dw.coder`` while only researchers run), waits in
its queues. Its nodes are ``queued`` like any node a moment from being claimed, so every
view of the run (``status``, ``watch``, ``run``'s progress line, the API, the
dashboard) says so through the node's ``NodeWait``: ``queue`` names the queue and the
``dagwright worker --type`` that serves it, ``worker`` says no worker is alive at all.

These waits are found when a run is read, never written: whether a worker is alive
changes without the run being touched, and the hot path (publish, claim) stays as it
is. A read costs the workers' capabilities hash (one HGETALL, reused for
``CAPABILITIES_FRESH_S``, read again before saying a queue is unserved, so a wait never
rests on a stale reading) and the queues of the queued nodes (one HMGET, each node's
queue remembered: it never changes). A node pooled for pulling (execution/pool.py) is
served by the workers of its queue like a published one.
"""

from __future__ import annotations

from datetime import UTC, datetime

from dagwright.keys import worker_type_of_queue
from dagwright.models import NodeState, NodeStatus, NodeWait, RunState
from dagwright.orchestrator.control.runnable import LiveCapabilities
from dagwright.orchestrator.runstate.machine import Dispatch
from dagwright.orchestrator.runtime import Runtime
from dagwright.workers.capabilities import WorkerCapabilities

REMEMBERED_QUEUES = 100_000  # node queues kept by one reader before it starts afresh
PROGRESS_NODES = 1_000  # queued nodes a progress line looks at (the longest-queued first)


class WorkerWaits:
    """Finds the queued nodes of a run that wait for a worker (see the module's doc)."""

    def __init__(self, runtime: Runtime, capabilities: LiveCapabilities | None = None) -> None:
        self.runtime = runtime
        self.capabilities = capabilities or LiveCapabilities(runtime)
        self._queues: dict[tuple[str, str], str] = {}  # (run, node) -> its queue

    def annotate(self, state: RunState) -> RunState:
        """``state`` with each queued node no live worker serves marked waiting for one."""
        waits = self.of_nodes(state.run_id, queued_without_wait(state))
        if not waits:
            return state
        nodes = {
            node_id: waiting(node, waits[node_id]) if node_id in waits else node
            for node_id, node in state.nodes.items()
        }
        return state.model_copy(update={"nodes": nodes})

    def of_queued(self, run_id: str, parked: dict[str, NodeWait]) -> dict[str, NodeWait]:
        """The waits of the run's queued nodes (the first ``PROGRESS_NODES`` queued) not
        ``parked`` on something else: for a progress line, without reading the run."""
        key = self.runtime.keys.run_key(run_id, "queued")
        queued = self.runtime.client.zrange(key, 0, PROGRESS_NODES - 1)
        return self.of_nodes(run_id, [node for node in queued if node not in parked])

    def of_nodes(self, run_id: str, queued: list[str]) -> dict[str, NodeWait]:
        """Which of the run's ``queued`` nodes wait for a worker, and on what."""
        if not queued:
            return {}
        queues = self.queues_of(run_id, queued)
        unserved = unserved_nodes(queues, self.capabilities.read())
        if unserved:  # read again: a worker may have started since the last reading
            unserved = unserved_nodes(queues, self.capabilities.read(fresh=True))
        if not unserved:
            return {}
        return self._waits(run_id, unserved, alive=bool(self.capabilities.read()))

    def queues_of(self, run_id: str, nodes: list[str]) -> dict[str, str]:
        """Each node's queue (its dispatch), read once per node."""
        unknown = [node for node in nodes if (run_id, node) not in self._queues]
        if unknown:
            if len(self._queues) > REMEMBERED_QUEUES:
                self._queues.clear()
            key = self.runtime.keys.run_key(run_id, "dispatch")
            for node, raw in zip(unknown, self.runtime.client.hmget(key, unknown), strict=True):
                if raw is not None:
                    self._queues[run_id, node] = Dispatch.from_json(raw).queue
        return {
            node: self._queues[run_id, node] for node in nodes if (run_id, node) in self._queues
        }

    def _waits(self, run_id: str, unserved: dict[str, str], *, alive: bool) -> dict[str, NodeWait]:
        """The waits of the ``unserved`` nodes (node -> queue) still queued, since they
        were queued (a node claimed meanwhile has left the ``queued`` set: none), once
        queued longer than ``worker_wait_grace_s``."""
        nodes = list(unserved)
        key = self.runtime.keys.run_key(run_id, "queued")
        queued_at = self.runtime.client.zmscore(key, nodes)
        grace_ms = self.runtime.settings.dispatch.worker_wait_grace_s * 1000
        if grace_ms:  # queued a moment ago: its worker may be starting
            newest = self.runtime.store.server_time_ms() - grace_ms
            queued_at = [at if at is not None and at <= newest else None for at in queued_at]
        made: dict[tuple[str, float], NodeWait] = {}  # a fan-out's nodes share theirs
        for node, at_ms in zip(nodes, queued_at, strict=True):
            if at_ms is not None and (unserved[node], at_ms) not in made:
                made[unserved[node], at_ms] = worker_wait(unserved[node], at_ms, alive=alive)
        return {
            node: made[unserved[node], at_ms]
            for node, at_ms in zip(nodes, queued_at, strict=True)
            if at_ms is not None
        }


def queued_without_wait(state: RunState) -> list[str]:
    """The run's queued nodes not already waiting on something (a slot)."""
    if state.status.is_final:
        return []
    return [
        node_id
        for node_id, node in state.nodes.items()
        if node.status == NodeStatus.QUEUED and node.waiting is None
    ]


def unserved_nodes(
    queues: dict[str, str], workers: dict[str, WorkerCapabilities]
) -> dict[str, str]:
    """The nodes (node -> queue) whose queue no live worker consumes."""
    consumed = {queue for worker in workers.values() for queue in worker.queues}
    return {node: queue for node, queue in queues.items() if queue not in consumed}


def waiting(node: NodeState, wait: NodeWait) -> NodeState:
    """``node`` waiting on ``wait`` (built without validating again what was read: a
    10,000-node fan-out is annotated in milliseconds)."""
    return NodeState.model_construct(
        _fields_set=node.model_fields_set | {"waiting"}, **{**node.__dict__, "waiting": wait}
    )


def worker_wait(queue: str, queued_at_ms: float, *, alive: bool) -> NodeWait:
    """A node on ``queue`` waiting for a worker, since it was queued: for one consuming
    its queue (``alive``: some worker is), or for any worker."""
    return NodeWait(
        on="queue" if alive else "worker",
        name=queue,
        since=datetime.fromtimestamp(queued_at_ms / 1000, tz=UTC),
        worker_type=worker_type_of_queue(queue),
    )


def behind_busy_workers(running: int, queued: int, workers: dict[str, WorkerCapabilities]) -> str:
    """One line when a run's ``queued`` nodes wait for a free worker process: its
    ``running`` nodes take every process of the live ``workers`` (each publishes how many
    it has), so more processes, not more patience, would start them ("" otherwise, or
    when the workers do not say)."""
    slots = sum(worker.slots for worker in workers.values())
    if not queued or not slots or running < slots:
        return ""
    busy = (
        "the one worker process is running a node"
        if slots == 1
        else f"all {slots} worker processes are running nodes"
    )
    return (
        f"{queued} node{'s' if queued > 1 else ''} queued behind busy workers: {busy} "
        "(more at once: `dagwright up --concurrency N`, or more `dagwright worker`s)"
    )
