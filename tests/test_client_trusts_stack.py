"""The client asks the live stack which functions exist before refusing a plan (issue 32):
with workers that imported a module (``dagwright up -I mytasks``), a plan calling its
functions runs from a client that did not import it; a function no live worker has is
refused in one line naming the live workers, what they offer and how to add it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from dagwright import Client, PlanBuilder, Settings
from dagwright.errors import PlanError
from dagwright.keys import Keys
from dagwright.models import RunStatus
from dagwright.orchestrator.control.live_registry import stack_workers
from dagwright.stackfile import read_stack
from dagwright.workers.capabilities import WorkerCapabilities
from tests.support.cli import cli_env, dagwright, json_out, one_error_line
from tests.support.processes import REPO_ROOT, Workers
from tests.support.waiting import wait_until

WORDSTATS = "examples.wordstats.functions"
WORDSTATS_PLAN = str(REPO_ROOT / "examples" / "wordstats" / "plan.yaml")
NODES = "tests.support.celery_nodes"  # where_it_ran: on a queue of its own ("gpu")


def start_worker_importing(workers: Workers, settings: Settings) -> None:
    """A worker serving ``function`` and ``function:gpu`` that imported WORDSTATS and
    NODES (the client imports neither), once its capabilities say so."""
    args = ("-t", "function", "-t", "function:gpu", "--import", WORDSTATS, "--import", NODES)
    workers.start(settings, concurrency=2, args=args)
    state = redis.Redis.from_url(settings.redis.url or "", decode_responses=True)
    wait_until(
        lambda: any(
            "where_it_ran" in WorkerCapabilities.from_json(raw)[0].functions
            for raw in state.hvals(Keys().worker_capabilities)
        ),
        timeout=60,
        what="a worker advertising the functions",
    )


def test_functions_only_the_live_workers_import_run_from_a_client_without_them(
    subprocess_settings: Settings, workers: Workers
) -> None:
    start_worker_importing(workers, subprocess_settings)
    client = Client(subprocess_settings)
    assert not {WORDSTATS, NODES} & set(client.settings.process.imports)  # the client has neither
    plan = PlanBuilder("trusted")
    plan.function("stats", "word_stats", params={"text": "to be or not to be", "top": 1})
    plan.function("where", "where_it_ran")  # routed to the queue the workers declare
    state = client.submit(plan.build()).wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, state
    assert state.nodes["stats"].output["words"] == 6
    assert "pid" in state.nodes["where"].output


def test_a_function_no_live_worker_has_is_refused_naming_the_workers_and_the_fix(
    subprocess_settings: Settings, workers: Workers
) -> None:
    start_worker_importing(workers, subprocess_settings)
    plan = PlanBuilder("unknown")
    plan.function("a", "word_stat")
    with pytest.raises(PlanError) as refused:
        Client(subprocess_settings).submit(plan.build())
    (problem,) = refused.value.problems
    assert problem.startswith(
        "node 'a': function 'word_stat' is registered neither here nor in any live worker "
        "(did you mean 'word_stats'?); 1 live worker (w0."
    ), problem
    (live,) = stack_workers(subprocess_settings).values()
    first = ", ".join(sorted(live.functions)[:10])
    more = len(live.functions) - 10  # bounded: the first ten named, the others counted
    assert f"offers functions: {first} and {more} more; " in problem
    assert problem.endswith(
        "to add it, restart `dagwright up` with `-I MODULE` naming the module that defines "
        "it (workers elsewhere: `--import MODULE` or DAGWRIGHT_IMPORTS)"
    )


@pytest.mark.subprocess
def test_run_and_validate_trust_the_functions_of_a_running_up(tmp_path: Path) -> None:
    """`dagwright up -I mytasks` running: `run plan.yaml` needs no `--import mytasks`;
    a function none of its workers has is refused, exit 2, in one line."""
    data = tmp_path / "data"
    env = cli_env(None, data)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("nodes:\n  - {id: a, type: function, function: fetch_prices}\n")
    up = subprocess.Popen(
        [sys.executable, "-m", "dagwright", "up", "-I", WORDSTATS, "--loglevel", "WARNING"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: read_stack(data), timeout=90, what="the stack file")
        settings = Settings(data_dir=data, redis_url=None)
        wait_until(lambda: stack_workers(settings), timeout=60, what="live workers")
        valid = dagwright("validate", WORDSTATS_PLAN, env=env)
        assert valid.returncode == 0, valid.stderr
        ran = dagwright("run", WORDSTATS_PLAN, "--json", env=env)
        assert ran.returncode == 0, ran.stderr
        assert json_out(ran)["status"] == "succeeded"
        for command in ("run", "validate"):
            refused = dagwright(command, str(unknown), env=env)
            assert refused.returncode == 2, refused.stderr
            line = one_error_line(refused)
            assert "'fetch_prices' is registered neither here nor in any live worker" in line
            assert "offers functions: " in line and "compare_stats" in line
    finally:
        up.send_signal(signal.SIGINT)
        try:
            _, stderr = up.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            up.kill()
            raise
    assert up.returncode == 0, stderr


def test_a_type_only_the_live_workers_serve_names_their_module_to_import(
    no_worker_settings: Settings,
) -> None:
    """The client routes and prices a type's nodes by its declaration: it must import it
    too, and is told which module the workers serving it import."""
    entry = WorkerCapabilities(
        worker_types=frozenset({"forecaster", "function"}),
        functions=frozenset({"noop"}),
        imports=("mytasks",),
        llm="ANTHROPIC_BASE_URL",
        queues=frozenset({"dw.forecaster", "dw.function"}),
        slots=2,
    )
    state = redis.Redis.from_url(no_worker_settings.redis.url or "")
    state.hset(Keys().worker_capabilities, "w1@host", entry.to_json(time.time() + 15))
    plan = PlanBuilder("typed")
    plan.agent("a", "forecaster", "forecast")
    with pytest.raises(PlanError) as refused:
        Client(no_worker_settings).submit(plan.build())
    (problem,) = refused.value.problems
    assert problem.startswith("node 'a' has type 'forecaster', which no worker type is ")
    assert problem.endswith(
        "; live workers serve it: pass `--import mytasks` too, so that this client can "
        "route its nodes"
    )
