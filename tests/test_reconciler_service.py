"""``dagwright reconciler``: the reconciler as its own process recovers what workers
started with ``--no-reconciler`` leave behind, and hands its lock over on SIGTERM."""

from __future__ import annotations

import os
from pathlib import Path

from dagwright import Client, PlanBuilder, RunStatus, Settings
from tests.support.processes import WorkerProcess, Workers
from tests.support.waiting import wait_until


def start(workers: Workers, settings: Settings, name: str, *command: str) -> WorkerProcess:
    process = WorkerProcess(
        settings, workers.log_dir / f"{name}.log", command=list(command), name=name
    )
    workers.append(process)
    return process


def start_worker_without_reconciler(workers: Workers, settings: Settings) -> WorkerProcess:
    name = f"w{len(workers)}"
    return start(
        workers, settings, name,
        "worker", "-c", "2", "--no-reconciler", "-n", f"{name}.{os.getpid()}@test",
    )  # fmt: skip


def lease_expired(client: Client, run_id: str, node: str) -> bool:
    runtime = client.runtime
    expires_ms = runtime.client.zscore(runtime.keys.run_key(run_id, "leases"), node)
    return expires_ms is not None and expires_ms < runtime.store.server_time_ms()


def test_a_standalone_reconciler_recovers_a_node_of_a_dead_worker(
    subprocess_settings: Settings, workers: Workers, tmp_path: Path
) -> None:
    client = Client(subprocess_settings)
    first = start_worker_without_reconciler(workers, subprocess_settings)
    plan = PlanBuilder("recovered by the reconciler service")
    slow = plan.function("slow", "count", params={"seconds": 3})
    plan.function("after", "count", depends_on=[slow])
    run = client.submit(plan.build(output="after"))
    state_key = client.runtime.keys.run_key(run.run_id, "state")
    wait_until(
        lambda: client.runtime.client.hget(state_key, "slow") == "running",
        timeout=30,
        what="slow running",
    )
    first.kill_all()  # its message stays unacknowledged: nothing hands it back
    start_worker_without_reconciler(workers, subprocess_settings)
    wait_until(lambda: lease_expired(client, run.run_id, "slow"), timeout=30, what="no lease")
    assert client.status(run.run_id).nodes["slow"].status == "running"  # stranded

    service = start(workers, subprocess_settings, "reconciler", "reconciler", "-l", "INFO")
    state = run.wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, workers.log_tails()
    kinds = [(event.kind, event.node) for event in run.events(follow=False)]
    assert ("node.lease_expired", "slow") in kinds
    lock = client.runtime.keys.reconciler_bucket_lease(0)
    assert client.runtime.client.get(lock)  # held by the service (the only reconciler)

    service.stop()
    assert service.process.returncode == 0, service.log_tail()
    assert client.runtime.client.get(lock) is None  # handed over on a clean stop
    log = service.log_path.read_text()
    assert "dagwright.tasks.reconciler_service: active" in log
    assert "reconciler stopped" in log
