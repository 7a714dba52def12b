"""Deaths a worker's parent process sees: the poison guard's only evidence.

When a prefork pool child dies running a node (killed by a signal, an OOM kill,
``os._exit``) or is killed at its hard time limit, the worker's main process survives and
Celery tells the message's ``Request`` (``on_failure`` with ``WorkerLostError``,
``on_timeout`` for the hard limit). ``DeathWatchRequest`` counts that death against the
node (``RunStateMachine.record_death``, fence-checked) before Celery hands the message
back, so the next claim knows it (``orchestrator/execution/poison.py``). A worker lost
whole (its parent died too) counts nothing here: its nodes come back by their expired
leases, with a backoff, as no fault of theirs.

Rejected: Celery's ``task_failure`` signal. It is not sent for a lost worker whose
message is requeued (``task_reject_on_worker_lost``), which is exactly the case counted
here; a custom request class is Celery's documented hook for both events.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from billiard.einfo import ExceptionWithTraceback
from celery.exceptions import WorkerLostError
from celery.worker import state as worker_state
from celery.worker.request import Request

from dagwright.app import DagwrightCelery
from dagwright.orchestrator.runstate.machine import LeaseRef
from dagwright.orchestrator.runtime import Runtime

log = logging.getLogger(__name__)

_runtimes: dict[tuple[int, int], Runtime] = {}


class DeathWatchRequest(Request):
    """Celery's request, which also counts the deaths of the pool child running it."""

    def on_failure(
        self, exc_info: Any, send_failed_event: bool = True, return_ok: bool = False
    ) -> None:
        cause = self._death_cause(exc_info.exception)
        if cause is not None:
            self._record_death(cause)
        super().on_failure(exc_info, send_failed_event=send_failed_event, return_ok=return_ok)

    def on_timeout(self, soft: bool, timeout: float) -> None:
        if not soft and not worker_state.should_terminate:
            self._record_death(f"hard time limit {timeout:g}s")
        super().on_timeout(soft, timeout)

    def _death_cause(self, exc: BaseException) -> str | None:
        """What killed the child, if it died by no decision of this worker's (a revoke
        that terminates it, a cold shutdown): then the node did."""
        if isinstance(exc, ExceptionWithTraceback):
            exc = exc.exc
        if self._already_cancelled or self._already_revoked or worker_state.should_terminate:
            return None
        if isinstance(exc, WorkerLostError | SystemExit):
            return str(exc) or type(exc).__name__
        return None

    def _record_death(self, cause: str) -> None:
        lease = lease_of(self.args)
        if lease is None:
            return
        try:
            deaths = parent_runtime(self.app).machine.record_death(lease, cause)
        except Exception:  # the lease still brings the node back; only the count is lost
            log.warning(
                "counting the death of %s/%s failed", lease.run_id, lease.node_id, exc_info=True
            )
            return
        if deaths:
            log.warning(
                "%s/%s: the process running it died (%s), %d time(s) since its last outcome",
                lease.run_id,
                lease.node_id,
                cause,
                deaths,
            )


def lease_of(args: Any) -> LeaseRef | None:
    """The node a ``dagwright.node.execute`` message names (``run_id, node_id, fence``);
    None for any other task."""
    if not isinstance(args, list | tuple) or len(args) != 3:
        return None
    run_id, node_id, fence = args
    if not (isinstance(run_id, str) and isinstance(node_id, str) and isinstance(fence, int)):
        return None
    return LeaseRef(run_id, node_id, fence)


def parent_runtime(app: DagwrightCelery) -> Runtime:
    """The worker main process's own connections (one Runtime per app and process)."""
    key = (id(app), os.getpid())
    if key not in _runtimes:
        _runtimes[key] = Runtime.from_settings(app.dagwright_settings)
    return _runtimes[key]
