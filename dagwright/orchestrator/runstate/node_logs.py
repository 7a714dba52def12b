"""A run's node logs in Redis: appended by the workers, read by the client, CLI and API.

One stream per run (``keys.run_logs``), beside the run's keys, not among them (no
run-state script carries it; a run whose nodes log nothing has none). Each entry is one
line, its one field ``line`` holding the line's JSON (node, attempt, source, text...,
see ``telemetry/node_logs.py``); the entry id is the line's id and the cursor a reader
continues from. The stream is capped (``node_log_run_max_lines``, XADD MAXLEN ~).

The logs cannot outlive their run: ``lua/node_logs.lua`` checks the run and appends in
one step, giving the stream the run hash's time to live; ``forget.lua`` gives it the
run's when the run ends, and ``replay.lua`` takes it away when a replay re-opens the run.

A node's lines are found by reading the run's stream and keeping that node's: a read is
bounded by ``limit`` lines found, and by the stream's cap.

Rejected: a stream per node (a run of 10,000 nodes would be 10,000 keys, which no single
step could expire with the run).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dagwright.errors import InputError, UnknownNodeError, UnknownRunError
from dagwright.keys import Keys
from dagwright.models import NodeLogLine, from_ms
from dagwright.redis_scripts import load_script, named_reply
from dagwright.shown_ids import shown_id

if TYPE_CHECKING:
    import redis
    import redis.asyncio

PACKAGE = "dagwright.orchestrator.runstate"
LINE_FIELD = "line"  # the one field of a stream entry: the line's JSON
READ_CHUNK = 1000  # entries read per round trip while looking for a node's lines
DEFAULT_LIMIT = 1000
MAX_LIMIT = 10_000
CURSOR = re.compile(r"\d{1,20}-\d{1,20}")


@dataclass
class LogRead:
    """One read of a run's logs: what is asked, what is found so far, where it stands."""

    run_id: str
    node: str | None
    after: str | None
    limit: int
    found: list[NodeLogLine] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.after is not None and not CURSOR.fullmatch(self.after):
            raise InputError(
                f"log cursor {shown_id(repr(self.after))}: a cursor is a line's id, "
                "<ms>-<seq>, as a read returned it"
            )
        if not 1 <= self.limit <= MAX_LIMIT:
            raise InputError(f"log limit {self.limit}: read 1 to {MAX_LIMIT} lines at a time")

    @property
    def start(self) -> str:
        """XRANGE's start: after the cursor (exclusive), else the stream's beginning."""
        return f"({self.after}" if self.after else "-"

    def check(self, status: Any, has_node: Any) -> None:
        """UnknownRunError if the run has no status, UnknownNodeError if no such node."""
        if status is None:
            raise UnknownRunError(self.run_id)
        if self.node is not None and not has_node:
            raise UnknownNodeError(self.run_id, self.node)

    def take(self, entries: list[Any]) -> bool:
        """Keep the asked lines of one chunk; True if another chunk must be read."""
        for entry_id, fields in entries:
            self.after = _text(entry_id)
            line = json.loads(fields[LINE_FIELD])
            if self.node is None or line.get("node") == self.node:
                self.found.append(log_line(self.run_id, self.after, line))
                if len(self.found) >= self.limit:
                    return False
        return len(entries) >= READ_CHUNK


class NodeLogs:
    """Append a node attempt's lines to its run's logs, and read them back."""

    def __init__(self, client: redis.Redis, keys: Keys, *, max_lines: int) -> None:
        self.client = client
        self.keys = keys
        self.max_lines = max_lines
        self._append = load_script(client, PACKAGE, "node_logs")

    def append(self, run_id: str, lines: list[str]) -> bool:
        """Append lines (each one's JSON); False if the run is gone (nothing written)."""
        keys, args = append_call(self.keys, run_id, lines, self.max_lines)
        return appended(self._append(keys=keys, args=args))

    def read(
        self,
        run_id: str,
        node: str | None = None,
        after: str | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> list[NodeLogLine]:
        """The run's lines (only ``node``'s, if given) after the cursor ``after``, oldest
        first, at most ``limit``. UnknownRunError, UnknownNodeError, InputError."""
        read = LogRead(run_id, node, after, limit)
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(self.keys.run_key(run_id, "run"), "status")
        pipe.hexists(self.keys.run_key(run_id, "spec"), node or "")
        pipe.xrange(self.keys.run_logs(run_id), read.start, "+", count=READ_CHUNK)
        status, has_node, entries = pipe.execute()
        read.check(status, has_node)
        while read.take(entries):
            entries = self.client.xrange(self.keys.run_logs(run_id), read.start, "+", READ_CHUNK)
        return read.found


class AsyncNodeLogs:
    """``NodeLogs``' reads over ``redis.asyncio`` (``AsyncClient.logs``)."""

    def __init__(self, client: redis.asyncio.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    async def read(
        self,
        run_id: str,
        node: str | None = None,
        after: str | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> list[NodeLogLine]:
        read = LogRead(run_id, node, after, limit)
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.hget(self.keys.run_key(run_id, "run"), "status")
            pipe.hexists(self.keys.run_key(run_id, "spec"), node or "")
            pipe.xrange(self.keys.run_logs(run_id), read.start, "+", count=READ_CHUNK)
            status, has_node, entries = await pipe.execute()
        read.check(status, has_node)
        while read.take(entries):
            logs = self.keys.run_logs(run_id)
            entries = await self.client.xrange(logs, read.start, "+", READ_CHUNK)
        return read.found


def append_call(
    keys: Keys, run_id: str, lines: list[str], max_lines: int
) -> tuple[list[str], list[str | int]]:
    """The keys and arguments of ``lua/node_logs.lua`` appending ``lines`` to the run."""
    return [keys.run_key(run_id, "run"), keys.run_logs(run_id)], [max_lines, *lines]


def appended(reply: Any) -> bool:
    return _text(named_reply(reply)["status"]) == "ok"


def log_line(run_id: str, entry_id: str, line: dict[str, Any]) -> NodeLogLine:
    """A stored line as the model: the entry id is its id; its time the worker's."""
    return NodeLogLine(
        id=entry_id,
        run_id=run_id,
        node=line["node"],
        attempt=line["attempt"],
        at=from_ms(line["at_ms"]) or from_ms(entry_id.split("-", 1)[0]),
        source=line["source"],
        level=line.get("level"),
        logger=line.get("logger"),
        text=line["text"],
    )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


__all__ = ["AsyncNodeLogs", "LogRead", "NodeLogs", "append_call", "appended", "log_line"]
