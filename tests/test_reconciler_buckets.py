"""Reconcilers that share the active runs by bucket (orchestrator/execution/buckets.py,
issue 31): any number split the buckets evenly, 10,000 active runs are all visited within
one lease period by two of them, and a reconciler that dies without a word (its leases
left to expire, as a SIGKILL leaves them) has its buckets taken over."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

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


def write_active_runs(runtime: Runtime, count: int) -> list[str]:
    """``count`` minimal open runs (a run hash, running, in the active set), written
    directly: what the reconciler visits, without the cost of creating real runs."""
    now_ms = runtime.store.server_time_ms()
    run_ids = [f"synthetic-{i:05d}" for i in range(count)]
    pipe = runtime.client.pipeline(transaction=False)
    for run_id in run_ids:
        fields = {"status": "running", "created_at": now_ms, "total": 1, "done": 0}
        pipe.hset(runtime.keys.run_key(run_id, "run"), mapping=fields)
    pipe.sadd(runtime.keys.active_runs, *run_ids)
    pipe.execute()
    return run_ids


@dataclass
class Visits:
    """When each run was first visited after ``since``, by which reconciler."""

    since: float = field(default_factory=time.monotonic)
    first: dict[str, tuple[float, str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def restart(self) -> None:
        with self.lock:
            self.since = time.monotonic()
            self.first = {}

    def record(self, run_ids: Sequence[str], by: str) -> None:
        now = time.monotonic()
        with self.lock:
            for run_id in run_ids:
                self.first.setdefault(run_id, (now - self.since, by))

    def count(self) -> int:
        with self.lock:
            return len(self.first)


class ReconcilerLoop:
    """A reconciler of its own (its own Runtime and token) passing every interval in a
    thread, as ``dagwright reconciler`` does; ``kill`` stops it without giving anything
    back, as a SIGKILL would."""

    def __init__(self, settings: Settings, name: str, visits: Visits) -> None:
        self.name = name
        self.reconciler = Reconciler(Runtime.from_settings(settings), RecordingBroker())
        self.interval_s = settings.reconcile_interval_s
        self.passes: list[float] = []  # seconds each pass took
        self._stop = threading.Event()
        machine = self.reconciler.runtime.machine
        visit = machine.reconcile_runs

        def spy(run_ids: Sequence[str], terms: ReconcileTerms) -> list[ReconcilePass | Exception]:
            found = visit(run_ids, terms)
            visits.record(run_ids, name)
            return found

        machine.reconcile_runs = spy  # type: ignore[method-assign]
        self._thread = threading.Thread(target=self._run, name=f"reconciler-{name}", daemon=True)
        self._thread.start()

    @property
    def held(self) -> set[int]:
        return set(self.reconciler.leases.held)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.reconciler.run_once()
            self.passes.append(time.monotonic() - started)
            self._stop.wait(self.interval_s)

    def kill(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def stop(self) -> None:
        self.kill()
        self.reconciler.release()


@pytest.fixture
def shared_settings(no_worker_settings: Settings) -> Settings:
    return no_worker_settings.model_copy(
        update={"reconcile_interval_s": 2.0, "reconciler_buckets": BUCKETS}
    )


@pytest.fixture
def loops() -> Iterator[list[ReconcilerLoop]]:
    started: list[ReconcilerLoop] = []
    yield started
    for loop in started:
        loop.stop()


def balanced(loops: Sequence[ReconcilerLoop]) -> bool:
    """Every bucket held by exactly one of ``loops``, each holding its share."""
    held = [loop.held for loop in loops]
    share = -(-BUCKETS // len(loops))
    every = set().union(*held)
    return (
        every == set(range(BUCKETS))
        and sum(map(len, held)) == BUCKETS
        and all(len(h) <= share for h in held)
    )


def test_two_reconcilers_share_10000_runs_and_visit_each_within_a_lease(
    shared_settings: Settings, loops: list[ReconcilerLoop]
) -> None:
    lease_s = shared_settings.reconcile_interval_s * LEASE_INTERVALS
    runtime = Runtime.from_settings(shared_settings)
    run_ids = write_active_runs(runtime, RUNS)
    visits = Visits()
    loops += [ReconcilerLoop(shared_settings, name, visits) for name in ("a", "b")]
    wait_until(lambda: balanced(loops), timeout=4 * lease_s, what="the buckets split in two")
    visits.restart()
    wait_until(lambda: visits.count() == RUNS, timeout=3 * lease_s, what="every run visited")
    slowest = max(at for at, _ in visits.first.values())
    assert slowest <= lease_s, f"the last run was visited {slowest:.2f}s after the start"
    by = {name for _, name in visits.first.values()}
    assert by == {"a", "b"}
    for run_id in run_ids[:200]:  # each run by the holder of its bucket
        holder = next(loop for loop in loops if bucket_of(run_id, BUCKETS) in loop.held)
        assert visits.first[run_id][1] == holder.name

    # a dies without a word: b takes its buckets once their leases expire, and visits
    # every run within a lease period from then
    a, b = loops
    a.kill()
    killed_at = time.monotonic()
    wait_until(lambda: b.held == set(range(BUCKETS)), timeout=4 * lease_s, what="b holds all")
    took_over_s = time.monotonic() - killed_at
    assert took_over_s <= lease_s + 2 * shared_settings.reconcile_interval_s + max(b.passes)
    visits.restart()
    wait_until(lambda: visits.count() == RUNS, timeout=3 * lease_s, what="every run visited by b")
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
    first = Reconciler(runtime, RecordingBroker())
    second = Reconciler(Runtime.from_settings(shared_settings), RecordingBroker())
    assert first.run_once().runs == 10  # alone: every bucket
    report = second.run_once()  # two alive: first holds its share and more until its pass
    assert not report.ran and report.runs == 0
    first.run_once()  # gives back what is past its share
    assert second.run_once().buckets and first.run_once().runs + second.run_once().runs == 10
