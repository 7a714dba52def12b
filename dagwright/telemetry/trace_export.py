"""Each ended run's trace sent over OTLP once, by the reconciler (``telemetry/otlp.py``).

Why the reconciler: its pass runs every few seconds on one process at a time (it holds
a lock). Rejected: exporting from the process that ends the run (a crash right after
loses the trace, a cancel ends runs from a client), or an OTel SDK in every worker
exporting spans live (an attempt starts in one process and may end in another, e.g. on
a lease expiry seen by the reconciler: no one process holds the whole span).

Exactly once:

- Whichever process drops an ended run from the active set (the worker that finished
  it, a cancel, or the reconciler after a crash) adds it to ``keys.trace_exports`` in
  the same Lua step (``forget.lua``; ZADD NX: twice is once). Every process must then
  have the same ``otlp_endpoint``.
- Each pass exports the due entries. It first pushes an entry's due time ahead (should
  the lock change hands during a slow export, the next holder does not take it too),
  exports the whole trace in one request, then marks the run hash (``otlp_exported_ms``
  = the run's ``finished_at``) and drops the entry. A failed export stays, due again
  ``RETRY_INTERVALS`` passes later, until the run expires.
- An entry whose run carries the mark for the same end is dropped unexported (a crash
  between the mark and the drop). A run that a replay re-opened is exported again when
  it ends again, under the same trace and span ids.

The one duplicate left: a crash after the collector accepted a trace and before the mark.
The export is then repeated, with the same ids.

The exports run in a thread of their own, one batch at a time: a pass runs on a worker's
event loop, which a slow collector must not hold up (no task handed out, presence not
renewed). Entries older than the retention are dropped by every pass, exporter or not, so
the queue cannot grow where no process exports.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from dagwright.connection import redact_url
from dagwright.errors import UnknownRunError
from dagwright.telemetry.otlp import OtlpTraceExporter, exporter_for
from dagwright.telemetry.run_trace import Trace
from dagwright.telemetry.trace_reads import read_trace

if TYPE_CHECKING:  # the reconciler passes its runtime in: telemetry sits below it
    from dagwright.orchestrator.runtime import Runtime

log = logging.getLogger(__name__)

EXPORTED_FIELD = "otlp_exported_ms"  # in the run hash: the finished_at that was exported
EXPORTS_PER_PASS = 20
RETRY_INTERVALS = 10  # a failed export is due again after this many reconciler intervals


class TraceExport:
    """The reconciler's export step (does nothing while no exporter is configured)."""

    def __init__(self, runtime: Runtime, exporter: OtlpTraceExporter | None) -> None:
        self.runtime = runtime
        self.exporter = exporter
        self._batch: threading.Thread | None = None
        self._exported = 0  # by the batches that ended since the last pass
        self._exported_lock = threading.Lock()  # the batch thread adds, the pass takes

    @classmethod
    def for_runtime(cls, runtime: Runtime) -> TraceExport:
        return cls(runtime, exporter_for(runtime.settings.telemetry.otlp_endpoint))

    def export_due(self) -> int:
        """Drop the entries of expired runs, and start exporting the due traces in the
        background unless a batch is still at it; how many traces the batches that ended
        since the last call exported."""
        client, key = self.runtime.client, self.runtime.keys.trace_exports
        now = self.runtime.store.server_time_ms()
        client.zremrangebyscore(
            key, "-inf", now - self.runtime.settings.retention.retention_s * 1000
        )
        with self._exported_lock:
            exported, self._exported = self._exported, 0
        if self.exporter is None or (self._batch is not None and self._batch.is_alive()):
            return exported
        due = client.zrangebyscore(key, "-inf", now, start=0, num=EXPORTS_PER_PASS)
        if due:
            self._batch = threading.Thread(
                target=self._export_batch,
                args=(self.exporter, due, now),
                name="dagwright-trace-export",
                daemon=True,
            )
            self._batch.start()
        return exported

    def wait(self, timeout_s: float) -> None:
        """Wait for the batch under way, if any (for tests and a clean stop)."""
        if self._batch is not None:
            self._batch.join(timeout_s)

    def _export_batch(self, exporter: OtlpTraceExporter, due: list[str], now: int) -> None:
        for run_id in due:
            try:
                sent = self._export(exporter, run_id, now)
            except Exception:  # Redis gone: the entries stay, a later pass retries them
                log.warning("exporting traces stopped", exc_info=True)
                return
            with self._exported_lock:
                self._exported += sent

    def _export(self, exporter: OtlpTraceExporter, run_id: str, now: int) -> bool:
        client, keys = self.runtime.client, self.runtime.keys
        finished, exported = client.hmget(
            keys.run_key(run_id, "run"), "finished_at", EXPORTED_FIELD
        )
        if finished is None or exported == finished:  # expired, re-opened, or done already
            client.zrem(keys.trace_exports, run_id)
            return False
        retry_ms = int(RETRY_INTERVALS * self.runtime.settings.dispatch.reconcile_interval_s * 1000)
        client.zadd(keys.trace_exports, {run_id: now + retry_ms}, xx=True)
        try:
            trace = read_trace(self.runtime.store, run_id)
        except UnknownRunError:
            client.zrem(keys.trace_exports, run_id)
            return False
        if not _sent(exporter, run_id, trace):
            return False
        # Two Cluster slots, in this order: a crash in between leaves an entry that the
        # next pass drops (exported == finished), never a trace sent twice.
        client.hset(keys.run_key(run_id, "run"), EXPORTED_FIELD, finished)
        client.zrem(keys.trace_exports, run_id)
        return True


def _sent(exporter: OtlpTraceExporter, run_id: str, trace: Trace) -> bool:
    url = redact_url(exporter.url)  # an endpoint may carry credentials
    try:
        accepted = exporter.export(trace)
    except Exception:  # an optional exporter must never stop the reconciler's pass
        log.warning("run %s: exporting its trace to %s failed", run_id, url, exc_info=True)
        return False
    if not accepted:
        log.warning("run %s: %s refused its trace; will try again", run_id, url)
    return accepted
