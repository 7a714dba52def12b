"""The reconciler as a process of its own (``dagwright reconciler``).

Workers run the reconciler on a timer by default; a deployment that runs them with
``--no-reconciler`` (many small workers, autoscaled to zero) runs this instead, as one
service to restart and watch on its own. It is the same pass under the same lock, so it
also coexists with workers that still run one: whoever holds the lock does the work.
"""

from __future__ import annotations

import logging
import threading

from dagwright.orchestrator.execution.reconciler import Reconciler, ReconcileReport
from dagwright.orchestrator.runtime import Runtime
from dagwright.settings import Settings
from dagwright.tasks.app_factory import build_app
from dagwright.tasks.publish import CeleryBroker
from dagwright.tasks.team_app import team_app_factory

log = logging.getLogger(__name__)


def run_reconciler(settings: Settings, *, stop: threading.Event) -> None:
    """Run a pass every ``settings.reconcile_interval_s`` until ``stop`` is set, then give
    the lock up so that a standby takes over at once."""
    app = build_app(settings)
    runtime = Runtime.from_settings(app.dagwright_settings)
    team_app = team_app_factory(settings)
    reconciler = Reconciler(runtime, CeleryBroker(app), team_app)
    was_active: bool | None = None
    try:
        while not stop.is_set():
            report = one_pass(reconciler)
            if report is not None and report.ran != was_active:
                was_active = report.ran
                log.info(
                    "active" if report.ran else "standing by: another reconciler holds the lock"
                )
            stop.wait(settings.reconcile_interval_s)
    finally:
        release(reconciler)


def one_pass(reconciler: Reconciler) -> ReconcileReport | None:
    """One pass; a failure (Redis away for a moment) is logged, and the next pass retries."""
    try:
        return reconciler.run_once()
    except Exception:
        log.warning("reconciler pass failed; the next pass will retry", exc_info=True)
        return None


def release(reconciler: Reconciler) -> None:
    try:
        if reconciler.release():
            log.info("lock released")
    except Exception:
        log.warning("could not release the lock; it expires by itself", exc_info=True)
