"""Per-key concurrency of runs: at most ``limit`` runs of one concurrency key running at
once (a plan's ``concurrency: {key: "{{ inputs.customer }}", limit: 2}``); the others are
accepted and wait, in the order submitted, their roots parked (RETRY_WAIT, "waiting for
concurrency key customer=acme: 2 of 2 runs running").

A key's places are two zsets (``keys.key_holders``/``key_waiters``). A run takes a place
in lua/admit.lua: right after its submit, and at each reconciler pass while it waits
(so a submitter dying in between loses nothing). It gives it back when it ends, however
it ends (success, failure, cancel, run timeout): ``Runtime.release_key_place`` runs with
the steps an ended run owes (``forget_active``), and every admission first drops the holders
and waiters whose run is no longer open or no longer exists (forgotten, expired), so a
crash between the end and the release leaks nothing either. A run has no worker of its
own to die: its nodes' workers may, and the run goes on (leases: docs/architecture.md,
"Recovery"), holding its place.

Rejected: the node slots of ``execution/limits.py`` with the run as holder (a slot is
renewed only while a node runs, so a run between two nodes, or retrying, would lose its
place to another run); a counter without waiters (no order, and nothing to show).
"""

from __future__ import annotations

import logging
from typing import Any

from dagwright.models import ConcurrencyKey, RunStatus
from dagwright.orchestrator.broker import Broker, dispatch
from dagwright.orchestrator.runstate.creation import CONCURRENCY_KEY_FIELD
from dagwright.orchestrator.runstate.machine import Admission
from dagwright.orchestrator.runtime import Runtime
from dagwright.plans.concurrency_keys import rendered_key
from dagwright.plans.run_inputs import declared_names

log = logging.getLogger(__name__)

CONCURRENCY_LIMIT_FIELD = "concurrency_limit"
# Another helper's fair dispatch reads this: the key runs are shared fairly across.
FAIR_KEY_FIELD = "fair_key"
OPEN = (RunStatus.RUNNING.value, RunStatus.PLANNING.value)


def key_fields(
    concurrency: ConcurrencyKey | None, inputs: dict[str, Any], schema: dict[str, Any] | None
) -> dict[str, str | int]:
    """The run hash's fields of a plan's concurrency key (none without one): the key
    rendered from the run's inputs, its limit, and the same key as ``fair_key``."""
    if concurrency is None:
        return {}
    key = rendered_key(concurrency, inputs, declared_names(schema))
    return {
        CONCURRENCY_KEY_FIELD: key,
        CONCURRENCY_LIMIT_FIELD: concurrency.limit,
        FAIR_KEY_FIELD: key,
    }


class RunGates:
    """Admits runs waiting for their concurrency key, and gives places back."""

    def __init__(self, runtime: Runtime, broker: Broker | None = None) -> None:
        self.runtime = runtime
        self.broker = broker

    def admit(self, run_id: str, tidied: set[str] | None = None) -> Admission | None:
        """Let ``run_id`` start if its key has room (its roots published); None if it has
        no key. ``tidied``: keys whose ended runs were dropped already in this pass."""
        client, keys = self.runtime.client, self.runtime.keys
        key = client.hget(keys.run_key(run_id, "run"), CONCURRENCY_KEY_FIELD)
        if key is None:
            return None
        if tidied is None or key not in tidied:
            self.drop_ended(key)
            if tidied is not None:
                tidied.add(key)
        admission = self.runtime.machine.admit(
            run_id,
            keys.key_holders(key),
            keys.key_waiters(key),
            max_wait_s=self.runtime.settings.throttles.concurrency_key_max_wait_s,
        )
        if admission.ready and self.broker is not None:
            dispatch(self.broker, self.runtime.machine, admission.ready)
        if admission.admitted:
            log.info("run %s took a place of concurrency key %s", run_id, key)
        if admission.expired:
            log.warning("run %s waited too long for concurrency key %s: failed", run_id, key)
            self.runtime.forget_active(run_id)
        return admission

    def drop_ended(self, key: str) -> int:
        """Drop the holders and waiters of ``key`` whose run is not open; how many."""
        client, keys = self.runtime.client, self.runtime.keys
        dropped = 0
        for zset in (keys.key_holders(key), keys.key_waiters(key)):
            runs = client.zrange(zset, 0, -1)
            if not runs:
                continue
            pipe = client.pipeline(transaction=False)
            for run_id in runs:
                pipe.hget(keys.run_key(run_id, "run"), "status")
            ended = [
                run for run, status in zip(runs, pipe.execute(), strict=True) if status not in OPEN
            ]
            if ended:
                dropped += client.zrem(zset, *ended)
        return dropped
