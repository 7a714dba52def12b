"""Lease renewal and stopping: one keeper per worker process watches every node it runs.

One heartbeat thread per process, not per node: a no-op node costs nothing extra, and a
process running many threads renews all of its leases in one round trip. The same thread
keeps each node's execution deadline (``timeout_s``): Celery's time limits act in the
prefork pool only, so dagwright enforces the timeout itself, in every pool. A second
thread listens for stopped runs (:mod:`dagwright.orchestrator.stop_signals`).

A node learns that it must stop through its ``stop`` event: its lease was lost (renewal
refused: re-queued elsewhere, or its run ended), its run was stopped (announced: within
about a round trip), or its deadline passed (``on_timeout`` has recorded the timeout).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from dagwright.orchestrator.runstate.machine import LeaseRef, RunStateMachine
from dagwright.orchestrator.stop_signals import StopListener, stopped_nodes

log = logging.getLogger(__name__)


@dataclass
class _Held:
    stop: threading.Event
    deadline: float | None  # time.monotonic() at which on_timeout is due
    on_timeout: Callable[[], None] | None
    renewed: bool = True  # False: a node run ahead (eager.py), which has no lease yet
    stops: bool = True  # False: reaching the deadline only calls on_timeout


class LeaseKeeper:
    def __init__(
        self,
        machine: RunStateMachine,
        *,
        lease_s: float,
        interval_s: float,
        renew_also: Callable[[], None] | None = None,
    ) -> None:
        self._machine = machine
        self._renew_also = renew_also  # e.g. the concurrency slots of the nodes held
        self._lease_s = lease_s
        self._interval_s = interval_s
        self._held: dict[LeaseRef, _Held] = {}
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._closed = threading.Event()
        self._wake = threading.Event()
        # When the keeper's thread next looks at the deadlines: a node held with a later
        # deadline (the usual case: deadlines are long) need not wake it.
        self._wakes_at = 0.0
        self._listener: StopListener | None = None

    @contextmanager
    def hold(
        self,
        lease: LeaseRef,
        stop: threading.Event,
        *,
        timeout_s: float | None = None,
        on_timeout: Callable[[], None] | None = None,
        renewed: bool = True,
        stops: bool = True,
    ) -> Iterator[None]:
        """Renew ``lease`` while the block runs; ``stop`` is set if it is taken away or its
        run is stopped. ``timeout_s`` after the start, ``on_timeout()`` is called once, in
        the keeper's thread (it records the timeout and sets ``stop``, unless not
        ``stops``). Not ``renewed``: only the deadline and the run's stop are kept (a
        chain's node run ahead of its claim, whose ``lease`` names it under fence 0:
        eager.py)."""
        deadline = time.monotonic() + timeout_s if timeout_s is not None else None
        self._add(lease, _Held(stop, deadline, on_timeout, renewed, stops))
        try:
            yield
        finally:
            with self._lock:
                self._held.pop(lease, None)

    def keep(
        self,
        lease: LeaseRef,
        lost: threading.Event,
        *,
        deadline: float | None = None,
        on_timeout: Callable[[], None] | None = None,
    ) -> None:
        """Renew ``lease`` until ``let_go`` (or a ``hold`` of it ends): a node of a batch
        claimed and not started yet, or one whose success waits to be recorded with the
        batch's, or a link running ahead claimed meanwhile, with its ``deadline`` (a
        ``time.monotonic()``) and ``on_timeout`` as ``hold`` has them (eager.py). ``lost``
        is set if it is taken away, its run stopped, or its deadline passed."""
        self._add(lease, _Held(lost, deadline, on_timeout))

    def _add(self, lease: LeaseRef, held: _Held) -> None:
        self._ensure_threads()
        with self._lock:
            self._held[lease] = held
            if held.deadline is not None and held.deadline < self._wakes_at:
                self._wake.set()  # due before the thread's next wake-up: it must look again

    def let_go(self, leases: list[LeaseRef]) -> None:
        """Stop renewing ``leases`` (their successes are recorded)."""
        if not leases:
            return
        with self._lock:
            for lease in leases:
                self._held.pop(lease, None)

    def holding(self) -> list[LeaseRef]:
        """The leases this process renews now."""
        with self._lock:
            return list(self._held)

    def close(self) -> None:
        self._closed.set()
        self._wake.set()
        if self._listener is not None:
            self._listener.close()

    def _ensure_threads(self) -> None:
        # Started lazily in the process that runs nodes: a thread does not survive fork().
        if self._pid == os.getpid():
            return
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._wakes_at = 0.0
        self._held = {}
        threading.Thread(target=self._keep_forever, name="dagwright-leases", daemon=True).start()
        client, keys = self._machine.client, self._machine.keys
        self._listener = StopListener(client, keys.stop_channel, self._stop_run).start()

    def _stop_run(self, announced: str) -> None:
        run_id, nodes = stopped_nodes(announced)
        with self._lock:
            stops = [
                held.stop
                for lease, held in self._held.items()
                if lease.run_id == run_id and (nodes is None or lease.node_id in nodes)
            ]
        for stop in stops:
            stop.set()
        if stops:
            log.info("run %s was stopped: stopping its %d node(s) here", run_id, len(stops))

    def _keep_forever(self) -> None:
        next_renewal = time.monotonic() + self._interval_s
        while not self._closed.is_set():
            self._wake.wait(max(0.0, self._plan_wake_up(next_renewal) - time.monotonic()))
            self._wake.clear()
            now = time.monotonic()
            self._time_out(now)
            if now >= next_renewal:
                next_renewal = now + self._interval_s
                with self._lock:
                    held = [(lease, h.stop) for lease, h in self._held.items() if h.renewed]
                if held:
                    self._renew(held)
                    self._renew_others()

    def _plan_wake_up(self, next_renewal: float) -> float:
        """When the thread must look next: the next renewal, or a sooner deadline. Set
        under the lock that ``hold`` takes, so a sooner deadline added later wakes it."""
        with self._lock:
            deadlines = [h.deadline for h in self._held.values() if h.deadline is not None]
            self._wakes_at = min([next_renewal, *deadlines])
            return self._wakes_at

    def _time_out(self, now: float) -> None:
        """Call ``on_timeout`` of each node past its deadline; the node is no longer this
        worker's then (its timeout is recorded), so its lease is not renewed any more."""
        with self._lock:
            due = [
                (lease, held)
                for lease, held in self._held.items()
                if held.deadline is not None and held.deadline <= now
            ]
            for lease, _ in due:
                del self._held[lease]
        for lease, held in due:
            if held.stops:
                log.warning("%s/%s ran past its timeout; stopping it", lease.run_id, lease.node_id)
            try:
                if held.on_timeout is not None:
                    held.on_timeout()
            except Exception:
                # Not recorded: the lease expires and the reconciler runs the node again.
                log.exception("recording the timeout of %s/%s failed", lease.run_id, lease.node_id)
            finally:
                if held.stops:
                    held.stop.set()

    def _renew(self, held: list[tuple[LeaseRef, threading.Event]]) -> None:
        try:
            results = self._machine.renew([lease for lease, _ in held], self._lease_s)
        except Exception:
            log.warning("renewing %d lease(s) failed; will retry", len(held), exc_info=True)
            return
        for (lease, lost), still_held in zip(held, results, strict=True):
            if not still_held:
                log.warning("lost the lease of %s/%s; stopping it", lease.run_id, lease.node_id)
                with self._lock:
                    self._held.pop(lease, None)  # not renewed again, nor timed out
                lost.set()

    def _renew_others(self) -> None:
        if self._renew_also is None:
            return
        try:
            self._renew_also()
        except Exception:
            log.warning("renewing what the running nodes hold failed; will retry", exc_info=True)
