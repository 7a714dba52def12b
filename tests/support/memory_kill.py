"""Fault injection for a worker subprocess (``--import tests.support.memory_kill``): the
process SIGKILLs itself right after a memory ``insert`` is applied, before the agent
loop checkpoints the call, once per ``KILL_KEY`` the test sets."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

from dagwright.memory.commands import Change
from dagwright.memory.store import CallRef, MemoryStore, Snapshot

KILL_KEY = "test:kill-after-memory-insert"
_apply = MemoryStore.apply


def _apply_then_die(
    self: MemoryStore,
    namespace: str,
    call: CallRef,
    snapshot: Snapshot,
    change: Change,
    record: str,
) -> dict[str, Any]:
    reply = _apply(self, namespace, call, snapshot, change, record)
    applied = reply.get("outcome") == "applied"
    if applied and json.loads(record)["command"] == "insert" and self.client.delete(KILL_KEY):
        os.kill(os.getpid(), signal.SIGKILL)
    return reply


MemoryStore.apply = _apply_then_die  # type: ignore[method-assign]
