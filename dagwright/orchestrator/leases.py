"""Lease renewal: one heartbeat thread per worker process renews every lease it holds.

One thread per process, not per node: a no-op node costs nothing extra, and a process
running many threads renews all of its leases in one round trip.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from dagwright.orchestrator.scheduler import LeaseRef, Scheduler

log = logging.getLogger(__name__)


class LeaseKeeper:
    def __init__(
        self,
        scheduler: Scheduler,
        *,
        lease_s: float,
        interval_s: float,
        renew_also: Callable[[], None] | None = None,
    ) -> None:
        self._scheduler = scheduler
        self._renew_also = renew_also  # e.g. the concurrency slots of the nodes held
        self._lease_s = lease_s
        self._interval_s = interval_s
        self._held: dict[LeaseRef, threading.Event] = {}
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._closed = threading.Event()

    @contextmanager
    def hold(self, lease: LeaseRef, lost: threading.Event) -> Iterator[None]:
        """Renew ``lease`` while the block runs; ``lost`` is set if it is taken away."""
        self._ensure_thread()
        with self._lock:
            self._held[lease] = lost
        try:
            yield
        finally:
            with self._lock:
                self._held.pop(lease, None)

    def close(self) -> None:
        self._closed.set()

    def _ensure_thread(self) -> None:
        # Started lazily in the process that runs nodes: a thread does not survive fork().
        if self._pid == os.getpid():
            return
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._held = {}
        threading.Thread(target=self._renew_forever, name="dagwright-leases", daemon=True).start()

    def _renew_forever(self) -> None:
        while not self._closed.wait(self._interval_s):
            with self._lock:
                held = list(self._held.items())
            if held:
                self._renew(held)
                self._renew_others()

    def _renew(self, held: list[tuple[LeaseRef, threading.Event]]) -> None:
        try:
            results = self._scheduler.renew([lease for lease, _ in held], self._lease_s)
        except Exception:
            log.warning("renewing %d lease(s) failed; will retry", len(held), exc_info=True)
            return
        for (lease, lost), still_held in zip(held, results, strict=True):
            if not still_held:
                log.warning("lost the lease of %s/%s; stopping it", lease.run_id, lease.node_id)
                lost.set()

    def _renew_others(self) -> None:
        if self._renew_also is None:
            return
        try:
            self._renew_also()
        except Exception:
            log.warning("renewing what the running nodes hold failed; will retry", exc_info=True)
