"""A failed node's dead letter, added to the DLQ stream in its own step before fail.lua.

The DLQ stream is one key, in its own Cluster slot, and a node's fenced failure is in its
run's slot: no script may write both. The dead letter is therefore added first (its fields
read from the run's keys, fenced by the claim the caller holds), and fail.lua then records
the failure naming it. Should fail.lua refuse (the claim was lost), the entry is deleted;
should the caller die in between, the entry names a node that did not fail, and a replay
of it is refused ("the node is running now, not failed"). So a failed node always has its
dead letter, and it is in the DLQ before its run can end (a waiter that sees the run end
finds it there).

Rejected: the dead letter written after fail.lua (the run could end, and be read, before
its dead letter exists; a crash in between would lose it unless a per-run outbox were
flushed by the reconciler).
"""

from __future__ import annotations

import json
import time
from typing import Any

from dagwright.keys import Keys
from dagwright.models import ErrorInfo

PAGE = 1000  # DLQ entries read a round trip when looking for those a dead caller added


def _text(value: str | None) -> str:
    return value or ""


class DeadLetterWriter:
    """Adds and withdraws dead letters of one client's runs."""

    def __init__(self, client: Any, keys: Keys, *, retention_s: int) -> None:
        self.client = client
        self.keys = keys
        self.retention_ms = retention_s * 1000

    def add(
        self, run_id: str, node_id: str, fence: int, error: ErrorInfo, classification: str
    ) -> str:
        """Add the dead letter of ``node_id`` failing under ``fence``; its entry id."""
        return self.add_many(run_id, [(node_id, fence)], error, classification)[0]

    def add_many(
        self,
        run_id: str,
        nodes: list[tuple[str, int | str]],
        error: ErrorInfo,
        classification: str,
    ) -> list[str]:
        """Add the dead letters of ``nodes`` (node, fence) of one run failing with one
        ``error``: two round trips (their fields read from the run's slot, then added to
        the stream's); their entry ids, in order."""
        if not nodes:
            return []
        pipe = self.client.pipeline(transaction=False)
        for node_id, _ in nodes:
            pipe.hget(self.keys.run_key(run_id, "spec"), node_id)
            pipe.hget(self.keys.run_key(run_id, "attempts"), node_id)
            pipe.hget(self.keys.run_key(run_id, "first_failure"), node_id)
        read = pipe.execute()
        now_ms = int(time.time() * 1000)  # as a malformed message's (dlq/store.py)
        pipe = self.client.pipeline(transaction=False)
        for index, (node_id, fence) in enumerate(nodes):
            spec, attempts, first_failure = read[index * 3 : index * 3 + 3]
            spec_text = _decoded(spec) or "{}"
            fields = {
                "run": run_id,
                "node": node_id,
                "fence": fence,
                "worker_type": json.loads(spec_text).get("type", ""),
                "spec": spec_text,
                "attempts": _decoded(attempts) or 0,
                "classification": classification,
                "error_class": _text(error.error_class),
                "message": _text(error.message),
                "traceback": _text(error.traceback),
                "first_failure_ms": _decoded(first_failure) or now_ms,
                "last_failure_ms": now_ms,
            }
            pipe.execute_command(
                "XADD", self.keys.dlq, "MINID", "~", now_ms - self.retention_ms, "*",
                *[item for pair in fields.items() for item in pair],
            )  # fmt: skip
        return [_decoded(entry) or "" for entry in pipe.execute()]

    def added_since(
        self, run_id: str, error_class: str, since_ms: int
    ) -> dict[tuple[str, str], str]:
        """The dead letters of ``run_id`` with ``error_class`` added since ``since_ms``
        (a step of the caller that may have died after adding them), as (node, fence) ->
        entry id: read a page at a time from that time on (the DLQ's newest entries)."""
        found: dict[tuple[str, str], str] = {}
        start = f"{max(since_ms, 0)}-0"
        while True:
            page = self.client.xrange(self.keys.dlq, min=start, max="+", count=PAGE)
            for entry_id, fields in page:
                text = {_decoded(key): _decoded(value) for key, value in fields.items()}
                if text.get("run") == run_id and text.get("error_class") == error_class:
                    node = (text.get("node") or "", text.get("fence") or "0")
                    found[node] = _decoded(entry_id) or ""
            if len(page) < PAGE:
                return found
            start = "(" + (_decoded(page[-1][0]) or "")

    def withdraw(self, entry_id: str) -> None:
        """Delete a dead letter whose failure was not recorded (the claim was lost)."""
        self.client.xdel(self.keys.dlq, entry_id)


def _decoded(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode()
    return None if value is None else str(value)
