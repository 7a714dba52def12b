"""Saying when a run queues behind busy workers (issue 32): `up` runs one worker process
per CPU, and a run with more nodes at once than that waits, which `status` and `run`'s
progress say, with how to run more at once."""

from __future__ import annotations

import os
import re
from pathlib import Path

from dagwright import Client, PlanBuilder, Settings
from dagwright.cli.stack import worker_processes
from dagwright.orchestrator.control.worker_waits import behind_busy_workers
from dagwright.workers.capabilities import WorkerCapabilities
from tests.support.cli import cli_env, dagwright
from tests.support.processes import Workers
from tests.support.waiting import wait_until


def capabilities(slots: int) -> WorkerCapabilities:
    return WorkerCapabilities(frozenset(), frozenset(), (), "", slots=slots)


def test_status_says_the_queued_nodes_wait_for_a_busy_worker(
    subprocess_settings: Settings, workers: Workers, tmp_path: Path
) -> None:
    workers.start(subprocess_settings, concurrency=1)
    client = Client(subprocess_settings)
    wait_until(lambda: client.live_workers.read(fresh=True), timeout=60, what="a live worker")
    plan = PlanBuilder("three naps")
    for name in ("a", "b", "c"):
        plan.function(name, "sleep", params={"seconds": 10})
    run = client.submit(plan.build())
    wait_until(lambda: run.status().counts.running == 1, timeout=30, what="one node running")
    shown = dagwright("status", run.run_id, env=cli_env(subprocess_settings, tmp_path / "d"))
    assert shown.returncode == 0, shown.stderr
    assert re.search(
        r"^[12] nodes? queued behind busy workers: the one worker process is running a node "
        r"\(more at once: `dagwright up --concurrency N`, or more `dagwright worker`s\)$",
        shown.stdout,
        re.MULTILINE,
    ), shown.stdout
    client.cancel(run.run_id)


def test_no_note_while_a_process_is_free_or_the_workers_do_not_say() -> None:
    two = {"w": capabilities(2)}
    assert behind_busy_workers(running=1, queued=3, workers=two) == ""
    assert behind_busy_workers(running=2, queued=0, workers=two) == ""
    assert behind_busy_workers(running=2, queued=1, workers={"w": capabilities(0)}) == ""
    assert behind_busy_workers(running=2, queued=1, workers=two).startswith(
        "1 node queued behind busy workers: all 2 worker processes are running nodes"
    )


def test_up_says_how_many_worker_processes_it_runs_and_how_to_change_it(
    settings: Settings,
) -> None:
    default = settings.model_copy(update={"worker_concurrency": None})
    cpus = os.cpu_count()
    assert worker_processes(None, default) == (
        f"{cpus} worker processes, one per CPU: `dagwright up --concurrency N` for more"
    )
    assert worker_processes(3, default) == "3 worker processes: --concurrency"
    configured = settings.model_copy(update={"worker_concurrency": 5})
    assert worker_processes(None, configured) == "5 worker processes: DAGWRIGHT_WORKER_CONCURRENCY"
