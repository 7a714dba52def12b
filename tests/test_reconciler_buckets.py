"""Reconcilers that share the active runs by bucket (orchestrator/execution/buckets.py,
issue 31): any number split the buckets evenly, 10,000 active runs are all visited within
one lease period by two of them, and a reconciler that dies without a word (its leases
left to expire, as a SIGKILL leaves them) has its buckets taken over."""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from dagwright import Settings
from dagwright.orchestrator.execution.buckets import BucketLeases, bucket_of
from dagwright.orchestrator.execution.reconciler import LEASE_INTERVALS, Reconciler
from dagwright.orchestrator.runstate.machine import ReconcilePass, ReconcileTerms
from dagwright.orchestrator.runtime import Runtime
from tests.support.runstate import RecordingBroker
from tests.support.waiting import wait_until

RUNS = 10_000
BUCKETS = 16
# The lease is 3 intervals. 2 s (the default: a 6 s lease) holds on a quiet machine
# (benchmarks/reconciler_visits.py); CI shares its cores, so the test gives each pass more
# room and checks the same promise against the lease that follows from it.
INTERVAL_S = 5.0


class QuietBroker(RecordingBroker):
    """Publishes nothing, revokes nothing: only the visits matter here."""

    def revoke(self, nodes: list[Any]) -> None:
        pass


def write_active_runs(runtime: Runtime, count: int) -> list[str]:
    """``count`` minimal open runs (a run hash, running, in the active set), written
    directly: what the reconciler visits, without the cost of creating real runs."""
    now_ms = runtime.store.server_time_ms()
    run_ids = [f"synthetic-{i:05d}" for i in range(count)]
    pipe = runtime.client.pipeline(transaction=False)
    for run_id in run_ids:
        fields: dict[str | bytes, str | int] = {
            "status": "running", "created_at": now_ms, "total": 1, "done": 0,
        }  # fmt: skip
        pipe.hset(runtime.keys.run_key(run_id, "run"), mapping=fields)
    pipe.sadd(runtime.keys.active_runs, *run_ids)
    pipe.execute()
    return run_ids


@dataclass
class Visits:
    """When each run was first visited after ``since`` (monotonic, the same clock in every
    process of the host), by which reconciler."""

    since: float = field(default_factory=time.monotonic)
    first: dict[str, tuple[float, str]] = field(default_factory=dict)

    def restart(self) -> None:
        self.since = time.monotonic()
        self.first = {}

    def record(self, at: float, run_ids: Sequence[str], by: str) -> None:
        if at >= self.since:
            for run_id in run_ids:
                self.first.setdefault(run_id, (at - self.since, by))


def reconciler_process(settings: Settings, name: str, reports: Any, stop: Any) -> None:
    """A reconciler in a process of its own, passing start to start every interval as
    ``dagwright reconciler`` does; it reports the runs it visits and the buckets it holds."""
    reconciler = Reconciler(Runtime.from_settings(settings), QuietBroker())
    machine = reconciler.runtime.machine
    visit = machine.reconcile_runs

    def spy(run_ids: Sequence[str], terms: ReconcileTerms) -> list[ReconcilePass | Exception]:
        found = visit(run_ids, terms)
        reports.put(("visits", name, time.monotonic(), list(run_ids)))
        return found

    machine.reconcile_runs = spy  # type: ignore[method-assign]
    while not stop.is_set():
        started = time.monotonic()
        report = reconciler.run_once()
        took = time.monotonic() - started
        reports.put(("pass", name, took, sorted(reconciler.leases.held), report.runs))
        stop.wait(max(settings.dispatch.reconcile_interval_s - took, 0.0))
    reconciler.release()


class ReconcilerLoop:
    """``reconciler_process`` started (spawned: nothing of this process is inherited);
    ``kill`` is a SIGKILL, which gives nothing back."""

    def __init__(self, settings: Settings, name: str, context: Any) -> None:
        self.name = name
        # A queue per process: a SIGKILL mid-put leaves its queue's write lock held
        self.reports = context.Queue()
        self.held: set[int] = set()
        self.passes: list[float] = []
        self._stop = context.Event()
        self.process = context.Process(
            target=reconciler_process, args=(settings, name, self.reports, self._stop), daemon=True
        )
        self.process.start()

    def kill(self) -> None:
        if self.process.pid is not None and self.process.is_alive():
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.join(timeout=30)

    def stop(self) -> None:
        # Only a live process is told: a SIGKILLed one may have died asleep on the event,
        # and setting it would wait forever for that sleeper to acknowledge
        if self.process.is_alive():
            self._stop.set()
            self.process.join(timeout=60)
        self.kill()


class Reconcilers:
    """The reconciler processes of a test, and what they report."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.context = multiprocessing.get_context("spawn")
        self.loops: dict[str, ReconcilerLoop] = {}
        self.visits = Visits()

    def start(self, *names: str) -> None:
        for name in names:
            self.loops[name] = ReconcilerLoop(self.settings, name, self.context)

    def drain(self) -> None:
        """Take in what the live processes reported so far (a killed one's queue may end
        in half a message)."""
        for loop in self.loops.values():
            while loop.process.is_alive():
                try:
                    kind, name, at, *rest = loop.reports.get(timeout=0.05)
                except queue.Empty:
                    break
                if kind == "visits":
                    self.visits.record(at, rest[0], name)
                else:
                    loop.held = set(rest[0])
                    loop.passes.append(at)

    def balanced(self, *names: str) -> bool:
        """Every bucket held by exactly one of ``names``, each holding its share."""
        self.drain()
        held = [self.loops[name].held for name in names]
        share = -(-BUCKETS // len(names))
        return (
            set().union(*held) == set(range(BUCKETS))
            and sum(map(len, held)) == BUCKETS
            and all(len(h) <= share for h in held)
        )

    def visited(self) -> int:
        self.drain()
        return len(self.visits.first)

    def stop_all(self) -> None:
        for loop in self.loops.values():
            loop.stop()


@pytest.fixture
def shared_settings(no_worker_settings: Settings) -> Settings:
    return no_worker_settings.model_copy(
        update={"reconcile_interval_s": INTERVAL_S, "reconciler_buckets": BUCKETS}
    )


@pytest.fixture
def reconcilers(shared_settings: Settings) -> Iterator[Reconcilers]:
    started = Reconcilers(shared_settings)
    yield started
    started.stop_all()


def test_two_reconcilers_share_10000_runs_and_visit_each_within_a_lease(
    shared_settings: Settings, reconcilers: Reconcilers
) -> None:
    lease_s = shared_settings.dispatch.reconcile_interval_s * LEASE_INTERVALS
    runtime = Runtime.from_settings(shared_settings)
    run_ids = write_active_runs(runtime, RUNS)
    reconcilers.start("a", "b")
    wait_until(lambda: reconcilers.balanced("a", "b"), timeout=60, what="the buckets split")
    visits = reconcilers.visits
    visits.restart()
    wait_until(lambda: reconcilers.visited() == RUNS, timeout=3 * lease_s, what="every run")
    slowest = max(at for at, _ in visits.first.values())
    assert slowest <= lease_s, f"the last run was visited {slowest:.2f}s after the start"
    assert {name for _, name in visits.first.values()} == {"a", "b"}
    a, b = reconcilers.loops["a"], reconcilers.loops["b"]
    for run_id in run_ids[:500]:  # each run by the holder of its bucket
        holder = a if bucket_of(run_id, BUCKETS) in a.held else b
        assert visits.first[run_id][1] == holder.name

    # a is SIGKILLed: b takes its buckets once their leases expire, then visits every run
    # within a lease period
    a.kill()
    killed_at = time.monotonic()
    wait_until(lambda: reconcilers.balanced("b"), timeout=4 * lease_s, what="b holds all")
    took_over_s = time.monotonic() - killed_at
    assert took_over_s <= lease_s + 2 * shared_settings.dispatch.reconcile_interval_s + max(
        b.passes
    )
    visits.restart()
    wait_until(lambda: reconcilers.visited() == RUNS, timeout=3 * lease_s, what="every run by b")
    assert {name for _, name in visits.first.values()} == {"b"}
    assert max(at for at, _ in visits.first.values()) <= lease_s


def test_any_number_of_reconcilers_split_the_buckets_and_a_clean_stop_hands_over_at_once(
    shared_settings: Settings,
) -> None:
    runtime = Runtime.from_settings(shared_settings)
    lease_ms = 60_000  # no lease expires during the test: only releases hand buckets over
    leases = [
        BucketLeases(runtime.client, runtime.keys, f"r{i}", buckets=BUCKETS, lease_ms=lease_ms)
        for i in range(3)
    ]
    for _ in range(3):  # a pass each, in turn: the first took all, then gave back
        held = [lease.refresh() for lease in leases]
    assert sorted(map(len, held)) == [4, 6, 6]  # each at most its share, ceil(16 / 3)
    assert set().union(*held) == set(range(BUCKETS))
    leases[0].release_all()  # a clean stop: its buckets are free at once
    held = [lease.refresh() for lease in leases[1:]]
    assert sorted(map(len, held)) == [8, 8] and set().union(*held) == set(range(BUCKETS))


def test_a_reconciler_holding_no_bucket_does_nothing(shared_settings: Settings) -> None:
    runtime = Runtime.from_settings(shared_settings)
    write_active_runs(runtime, 10)
    first = Reconciler(runtime, QuietBroker())
    second = Reconciler(Runtime.from_settings(shared_settings), QuietBroker())
    assert first.run_once().runs == 10  # alone: every bucket
    report = second.run_once()  # two alive: first holds its share and more until its pass
    assert not report.ran and report.runs == 0
    first.run_once()  # gives back what is past its share
    assert second.run_once().buckets and first.run_once().runs + second.run_once().runs == 10
