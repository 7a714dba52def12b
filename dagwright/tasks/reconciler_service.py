"""The reconciler as a process of its own (``dagwright reconciler``).

Workers run the reconciler on a timer by default; a deployment that runs them with
``--no-reconciler`` (many small workers, autoscaled to zero) runs this instead, as one
service to restart and watch on its own. It is the same pass over the same leased
buckets of active runs, so any number of them (and workers that still run one) share
the work (orchestrator/execution/buckets.py).
"""

from __future__ import annotations

import logging
import threading
import time

from dagwright.orchestrator.execution.reconciler import Reconciler, ReconcileReport
from dagwright.orchestrator.runtime import Runtime
from dagwright.settings import Settings
from dagwright.tasks.app_factory import build_app
from dagwright.tasks.publish import CeleryBroker
from dagwright.tasks.team_app import team_app_factory

log = logging.getLogger(__name__)


def run_reconciler(settings: Settings, *, stop: threading.Event) -> None:
    """Run a pass every ``settings.dispatch.reconcile_interval_s`` until ``stop`` is set, then give
    its buckets up so that the other reconcilers take them over at once."""
    app = build_app(settings)
    runtime = Runtime.from_settings(app.dagwright_settings)
    team_app = team_app_factory(settings)
    reconciler = Reconciler(runtime, CeleryBroker(app), team_app)
    was_active: bool | None = None
    try:
        while not stop.is_set():
            started = time.monotonic()
            report = one_pass(reconciler)
            if report is not None and report.ran != was_active:
                was_active = report.ran
                log.info(
                    "active"
                    if report.ran
                    else "standing by: the other reconcilers hold every bucket"
                )
            # start to start: a pass that took long is followed by the next at once, so a
            # run's visits are at most max(interval, pass) apart (within its bucket's lease)
            stop.wait(
                max(settings.dispatch.reconcile_interval_s - (time.monotonic() - started), 0.0)
            )
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
            log.info("buckets released")
    except Exception:
        log.warning(
            "could not release the buckets; their leases expire by themselves", exc_info=True
        )
