"""A live worker's capabilities entry, written by hand: what a pool sees of its pullers."""

from __future__ import annotations

import time

from dagwright.orchestrator.execution.attempt import ExecutionEnv
from dagwright.workers.capabilities import WorkerCapabilities


def announce(
    worker_env: ExecutionEnv, name: str, *, slots: int, queue: str, pulls: bool = True
) -> None:
    """A live worker serving ``queue`` with ``slots`` slots, as its presence step writes it."""
    capabilities = WorkerCapabilities(
        worker_types=frozenset({"function"}),
        functions=frozenset(),
        imports=(),
        llm="",
        queues=frozenset({queue}),
        slots=slots,
        pulls=pulls,
    )
    worker_env.runtime.client.hset(
        worker_env.runtime.keys.worker_capabilities, name, capabilities.to_json(time.time() + 60)
    )
