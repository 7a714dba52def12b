"""Memory namespaces in Redis: their files, limits and retention, and the exactly-once
apply of a node's write.

A namespace is two keys (``Keys.memory_files``: path -> text; ``Keys.memory_meta``:
``version``, ``bytes``, ``updated_ms``) and a member of ``Keys.memory_namespaces``. Every
write renews the namespace's retention (``memory_retention_s``, or its own in
``memory_namespace_retention_s``); Redis then forgets it whole.

A node's write (``NodeMemory.run``) is computed from the files as read, then applied by
``lua/apply.lua`` in one step that also records the call under the run's
``memory_writes`` (``<node>/<tool_use_id>``), and only if the node is still this
worker's (its fence) and nobody wrote in between (the ``version`` it read; else it is
computed again). A worker killed after the apply and before its checkpoint leaves the
call recorded: the resumed node, answering the same ``tool_use``, finds the record and
returns its result without writing again; killed before, nothing was written, and the
call runs once. So a write is applied once, whatever dies when.

On a Redis Cluster the namespace (its own slot) and the run (another) cannot be written in
one step (docs/internals/cluster.md, decision 116): ``lua/check_node.lua`` checks the node
is this worker's and the call new in the run's slot; the namespace is listed; then
``lua/write_namespace.lua`` writes in the namespace's slot, guarded by the namespace's
writers hash (``Keys.memory_writers``: the highest fence each node showed there, raised by
its reads too, ``lua/read_namespace.lua``, and its last applied call); then the record is
copied to the run. A zombie whose node was taken over is refused once the new owner has
touched the namespace; before that, its write is one the new owner reads as made before
the takeover. A worker dying between the namespace's step and the copy leaves the record
in the writers hash, where the resumed node's same call finds it.

Everything written is redacted first (``dagwright.redaction``): no secret of the settings
is stored, whatever the model was shown. Limits (``memory_max_file_bytes``,
``memory_max_files``, ``memory_max_namespace_bytes``) refuse a write with a ToolError the
model is told.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import redis

from dagwright.errors import NodeLostError, ToolError
from dagwright.keys import Keys
from dagwright.memory.commands import Change, MemoryCommand, run_command
from dagwright.memory.paths import ROOT, memory_path
from dagwright.redaction import known_secrets, redact
from dagwright.redis_scripts import is_cluster_client, load_script, named_reply
from dagwright.settings import Settings

WRITE_TRIES = 5  # a write computed again this often while others write first, then refused


@dataclass(frozen=True)
class NamespaceInfo:
    """One namespace as ``memory ls`` shows it."""

    name: str
    files: int
    bytes: int
    updated_ms: int


@dataclass(frozen=True)
class Snapshot:
    """A namespace's files and the version they were read at."""

    files: dict[str, str]
    version: str


@dataclass(frozen=True)
class CallRef:
    """The node and call a write belongs to: where its record goes, and its fence."""

    run_id: str
    node_id: str
    fence: int
    tool_use_id: str

    @property
    def field(self) -> str:
        return f"{self.node_id}/{self.tool_use_id}"

    @property
    def writer(self) -> str:
        """The node, as a namespace's writers hash names it (on a Cluster)."""
        return f"{self.run_id}/{self.node_id}"


class MemoryStore:
    """The memory namespaces of one deployment."""

    def __init__(self, client: redis.Redis, keys: Keys, settings: Settings) -> None:
        self.client = client
        self.keys = keys
        self.settings = settings
        self._apply = load_script(client, "dagwright.memory", "apply")
        self._cluster = is_cluster_client(client)
        self._steps = {
            name: load_script(client, "dagwright.memory", name)
            for name in ("check_node", "write_namespace", "read_namespace")
        }

    def retention_s(self, namespace: str) -> int:
        seconds = self.settings.memory.namespace_retention_s.get(
            namespace, self.settings.memory.retention_s
        )
        return max(1, round(seconds))

    def snapshot(self, namespace: str) -> Snapshot:
        """The files and version of ``namespace``, read at one instant."""
        pipe = self.client.pipeline(transaction=True)
        pipe.hgetall(self.keys.memory_files(namespace))
        pipe.hget(self.keys.memory_meta(namespace), "version")
        files, version = pipe.execute()
        return Snapshot(dict(files or {}), str(version or "0"))

    def snapshot_for(self, namespace: str, call: CallRef) -> Snapshot:
        """``snapshot`` as the node of ``call`` reads it: on a Cluster its fence is shown to
        the namespace too (no zombie of it writes there after), and NodeLostError if a
        newer fence of the node was shown already."""
        if not self._cluster:
            return self.snapshot(namespace)
        reply = named_reply(
            self._steps["read_namespace"](
                keys=self._namespace_keys(namespace),
                args=[call.writer, call.fence, self.retention_s(namespace)],
            )
        )
        if int(reply["stale"]):
            raise NodeLostError("stopped: the node was taken over")
        flat = list(reply["files"])
        return Snapshot(dict(zip(flat[::2], flat[1::2], strict=True)), str(reply["version"]))

    def _namespace_keys(self, namespace: str) -> list[str]:
        return [
            self.keys.memory_files(namespace),
            self.keys.memory_meta(namespace),
            self.keys.memory_writers(namespace),
        ]

    def namespaces(self) -> list[NamespaceInfo]:
        """Every namespace still held, newest write first (expired ones are dropped)."""
        found = []
        for name, score in self.client.zrevrange(
            self.keys.memory_namespaces, 0, -1, withscores=True
        ):
            info = self.info(str(name), int(score))
            if info is None:
                self.client.zrem(self.keys.memory_namespaces, name)
            else:
                found.append(info)
        return found

    def info(self, namespace: str, updated_ms: int = 0) -> NamespaceInfo | None:
        """What ``namespace`` holds (None: nothing: never written, removed or expired)."""
        files = self.snapshot(namespace).files
        if not files and not self.client.exists(self.keys.memory_meta(namespace)):
            return None
        size = sum(len(text.encode()) for text in files.values())
        return NamespaceInfo(namespace, len(files), size, updated_ms)

    def remove(self, namespace: str) -> bool:
        """Forget ``namespace`` whole; False if there was nothing."""
        removed = self.client.delete(*self._namespace_keys(namespace))
        self.client.zrem(self.keys.memory_namespaces, namespace)
        return bool(removed)

    def replace(self, namespace: str, files: Mapping[str, str]) -> int:
        """Make ``namespace`` hold exactly ``files`` (an import): paths checked, texts
        redacted and within the limits (ToolError otherwise, nothing written). How many."""
        cleaned = self.checked_files(files)
        # Listed first (the index is in another Cluster slot): a crash before the write
        # leaves a listed namespace with nothing, which ``namespaces`` drops.
        self.client.zadd(self.keys.memory_namespaces, {namespace: _now_ms(self.client)})
        pipe = self.client.pipeline(transaction=True)
        files_key, meta_key = self.keys.memory_files(namespace), self.keys.memory_meta(namespace)
        pipe.delete(files_key)
        for path, text in cleaned.items():
            pipe.hset(files_key, path, text)
        size = sum(len(text.encode()) for text in cleaned.values())
        pipe.hincrby(meta_key, "version", 1)
        pipe.hset(meta_key, mapping={"bytes": size, "updated_ms": _now_ms(self.client)})
        for key in (files_key, meta_key):
            pipe.expire(key, self.retention_s(namespace))
        pipe.execute()
        return len(cleaned)

    def checked_files(self, files: Mapping[str, str]) -> dict[str, str]:
        """``files`` with normalised paths, redacted, within the limits."""
        secrets = known_secrets(self.settings)
        if any(memory_path(path) == ROOT for path in files):
            raise ToolError(f"{ROOT} is the directory of every file: name a file under it")
        cleaned = {
            redact(memory_path(path), secrets): redact(text, secrets)
            for path, text in files.items()
        }
        check_limits(cleaned, cleaned.keys(), self.settings)
        return cleaned

    def apply(
        self, namespace: str, call: CallRef, snapshot: Snapshot, change: Change, record: str
    ) -> dict[str, Any]:
        """Run ``lua/apply.lua`` for ``change`` (see the module's docstring)."""
        after = {**snapshot.files, **{p: t for p, t in change.writes.items() if t is not None}}
        for path, text in change.writes.items():
            if text is None:
                after.pop(path, None)
        size = sum(len(text.encode()) for text in after.values())
        triples: list[str] = []
        for path, text in change.writes.items():
            triples += [path, "del" if text is None else "set", text or ""]
        if self._cluster:
            return self._apply_in_steps(namespace, call, snapshot, [record, size, *triples])
        keys = [
            self.keys.run_key(call.run_id, "state"),
            self.keys.run_key(call.run_id, "fence"),
            self.keys.memory_writes(call.run_id),
            self.keys.memory_files(namespace),
            self.keys.memory_meta(namespace),
            self.keys.memory_namespaces,
        ]
        args: list[str | int] = [call.node_id, str(call.fence), call.field, snapshot.version]
        args += [self.retention_s(namespace), namespace, record, size, *triples]
        return named_reply(self._apply(keys=keys, args=args))

    def _apply_in_steps(
        self, namespace: str, call: CallRef, snapshot: Snapshot, write: list[Any]
    ) -> dict[str, Any]:
        """``apply`` on a Cluster: the run's slot, the index, the namespace's slot, the
        run's slot again (the module's docstring; decision 116)."""
        run_keys = [
            self.keys.run_key(call.run_id, "state"),
            self.keys.run_key(call.run_id, "fence"),
            self.keys.memory_writes(call.run_id),
        ]
        checked = self._steps["check_node"](
            keys=run_keys, args=[call.node_id, str(call.fence), call.field]
        )
        reply = named_reply(checked)
        if reply["outcome"] != "ours":
            return reply
        # Listed first (another slot): a crash before the write leaves a listed namespace
        # with nothing, which ``namespaces`` drops. The writer's clock: a sort key only.
        self.client.zadd(self.keys.memory_namespaces, {namespace: int(time.time() * 1000)})
        retention = self.retention_s(namespace)
        args = [call.writer, call.fence, call.field, snapshot.version, retention, *write]
        reply = named_reply(
            self._steps["write_namespace"](keys=self._namespace_keys(namespace), args=args)
        )
        if reply["outcome"] in ("applied", "done"):
            record = str(reply.get("record", write[0]))
            pipe = self.client.pipeline(transaction=False)  # one key: one round trip
            pipe.hset(self.keys.memory_writes(call.run_id), call.field, record)
            pipe.expire(self.keys.memory_writes(call.run_id), retention)
            pipe.execute()
        return reply

    def recorded(self, call: CallRef) -> dict[str, Any] | None:
        """The record of ``call`` if its write was applied already."""
        text = self.client.hget(self.keys.memory_writes(call.run_id), call.field)
        return None if text is None else json.loads(text)

    def writes_of_run(self, run_id: str) -> dict[str, dict[str, Any]]:
        """The memory writes of ``run_id``'s nodes: ``<node>/<tool_use_id>`` -> record."""
        found = self.client.hgetall(self.keys.memory_writes(run_id))
        return {str(field): json.loads(text) for field, text in found.items()}


def check_limits(after: Mapping[str, str], written: Any, settings: Settings) -> None:
    """ToolError if a file of ``written`` is too big, or ``after`` (the namespace once
    written) holds too many files or bytes."""
    for path in written:
        text = after.get(path)
        size = 0 if text is None else len(text.encode())
        if size > settings.memory.max_file_bytes:
            raise ToolError(
                f"The file {path} would hold {size} bytes, more than the limit of "
                f"{settings.memory.max_file_bytes} per memory file: write less"
            )
    if len(after) > settings.memory.max_files:
        raise ToolError(
            f"The memory would hold {len(after)} files, more than the limit of "
            f"{settings.memory.max_files}: delete or merge files first"
        )
    total = sum(len(text.encode()) for text in after.values())
    if total > settings.memory.max_namespace_bytes:
        raise ToolError(
            f"The memory would hold {total} bytes, more than the limit of "
            f"{settings.memory.max_namespace_bytes}: delete or shorten files first"
        )


def _now_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


class NodeMemory:
    """The memory tool as one node sees it: its namespace, whether it may write, and where
    its writes are recorded."""

    def __init__(self, store: MemoryStore, namespace: str, *, read_only: bool) -> None:
        self.store = store
        self.namespace = namespace
        self.read_only = read_only

    def run(self, command: MemoryCommand, call: CallRef) -> str:
        """The result text of ``command``; ToolError (for the model) if refused;
        NodeLostError if the node is no longer this worker's (nothing written)."""
        if command.writes and self.read_only:
            raise ToolError(
                f"The memory namespace {self.namespace} is read-only for this agent: "
                f"{command.command} was refused (view is allowed)"
            )
        if not command.writes:
            return run_command(command, self.store.snapshot_for(self.namespace, call).files).text
        earlier = self.store.recorded(call)
        if earlier is not None:  # applied by an attempt that died before its checkpoint
            return str(earlier["result"])
        return self._write(command, call)

    def _write(self, command: MemoryCommand, call: CallRef) -> str:
        for _ in range(WRITE_TRIES):
            snapshot = self.store.snapshot_for(self.namespace, call)
            change = self._cleaned(run_command(command, snapshot.files), snapshot.files)
            record = json.dumps(
                {
                    "namespace": self.namespace,
                    "command": command.command,
                    "paths": sorted(change.writes),
                    "result": change.text,
                }
            )
            reply = self.store.apply(self.namespace, call, snapshot, change, record)
            outcome = reply["outcome"]
            if outcome == "lost":
                raise NodeLostError("stopped: the node was cancelled or taken over")
            if outcome == "done":
                return str(json.loads(reply["record"])["result"])
            if outcome == "applied":
                return change.text
        raise ToolError(
            f"The memory namespace {self.namespace} kept changing under this write "
            f"({WRITE_TRIES} tries): try again"
        )

    def _cleaned(self, change: Change, files: Mapping[str, str]) -> Change:
        """``change`` with its secrets masked (paths and texts), checked against the limits."""
        secrets = known_secrets(self.store.settings)
        writes = {
            redact(path, secrets): (None if text is None else redact(text, secrets))
            for path, text in change.writes.items()
        }
        after = dict(files)
        for path, text in writes.items():
            if text is None:
                after.pop(path, None)
            else:
                after[path] = text
        check_limits(after, [p for p, t in writes.items() if t is not None], self.store.settings)
        return Change(redact(change.text, secrets), writes)
