"""The poison guard: which deliveries of a node must not run it.

A node that kills the process running it (a segfault, an OOM kill, ``os._exit``, its hard
time limit) would be delivered for ever, since ``max_attempts`` is checked only when a node
raises. But a process can die for reasons that are none of the node's: its whole worker
lost with a host, an eviction or a spot preemption. The two are told apart by who saw the
death. A prefork child's death is seen by its parent, which survives it
(``tasks/deaths.py`` counts it: ``Claim.deaths``); a worker lost whole leaves no one to
see anything, only a lease that expires (``reconcile.lua`` counts it: ``Claim.losses``,
and delivers the node again after a backoff).

Rejected: counting every delivery without an outcome (until issue 31). With workers
SIGKILLed in turn, innocent nodes met their third lease expiry and were dead-lettered.
"""

from __future__ import annotations

from dagwright.errors import PermanentError, PoisonMessageError, WorkersLostError
from dagwright.orchestrator.runstate.machine import Claim
from dagwright.settings import Settings


def refused_delivery(settings: Settings, claim: Claim) -> PermanentError | None:
    """Why this delivery must not run the node, or None. The guard against a node that
    kills the process running it (a segfault, an OOM kill, a hard time limit: deaths its
    worker's surviving parent saw) fails it as poison; one whose whole workers kept being
    lost (host losses, evictions: no fault of its own) ends only past max_worker_losses."""
    if claim.deaths >= settings.dispatch.max_deliveries:
        times = "once" if claim.deaths == 1 else f"{claim.deaths} times"
        return PoisonMessageError(
            f"the process running it died {times} without finishing (killed "
            "by a signal, an OOM kill or its hard time limit, as its worker saw); not run "
            "again. Find the cause in the worker logs, then `dagwright dlq replay`"
        )
    if claim.losses > settings.dispatch.max_worker_losses:
        return WorkersLostError(
            f"its worker was lost {claim.losses} times without finishing (lease expired: "
            "the worker died whole, or hung); not delivered again (max_worker_losses "
            f"{settings.dispatch.max_worker_losses}). Check the workers, "
            "then `dagwright dlq replay`"
        )
    return None
