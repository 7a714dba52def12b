"""An eval survives a worker SIGKILLed under one of its cases: every case completes and
is scored once (real worker subprocesses)."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import yaml

from dagwright import Client, RunStatus, Settings
from dagwright.evals.runner import EvalOptions, EvalRunner, eval_store
from dagwright.evals.suite import parse_suite
from tests.support.functions import executions_key
from tests.support.processes import Workers
from tests.support.waiting import wait_until

PLAN = {
    "goal": "a slow step, then a quick one",
    "inputs": {"type": "object", "properties": {"seconds": {"type": "number"}}},
    "output": "after",
    "nodes": [
        {"id": "slow", "type": "function", "function": "count", "params": {"seconds": 2}},
        {"id": "after", "type": "function", "function": "count", "depends_on": ["slow"]},
    ],
}


def holder_pids(client: Client, run_ids: list[str]) -> list[int]:
    pids = []
    for run_id in run_ids:
        holder = client.runtime.client.hget(client.runtime.keys.run_key(run_id, "holder"), "slow")
        if holder:
            pids.append(int(holder.rpartition(":")[2]))
    return pids


def test_an_eval_whose_worker_is_killed_completes_with_each_case_scored_once(
    subprocess_settings: Settings, workers: Workers, tmp_path: Path
) -> None:
    settings = subprocess_settings.model_copy(update={"lease_s": 60.0})
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(yaml.safe_dump(PLAN))
    suite = parse_suite(
        {
            "name": "survivor",
            "plan": str(plan_file),
            "scorers": [{"equals": "after"}, {"succeeded": True}],
            "cases": [{"name": f"case-{i}"} for i in range(3)],
        }
    )
    workers.start(settings)
    client = Client(settings)
    runner = EvalRunner(client, suite, EvalOptions(), suite_dir=tmp_path)
    record = runner.new_record()
    reports = []
    driver = threading.Thread(target=lambda: reports.append(runner.run(record)), daemon=True)
    driver.start()

    def runs_started() -> list[str]:
        return list(client.runtime.client.zrange(client.runtime.keys.run_index, 0, -1))

    run_ids = wait_until(
        lambda: len(runs_started()) == 3 and runs_started(), timeout=30, what="runs"
    )
    victim = wait_until(
        lambda: next(iter(holder_pids(client, run_ids)), 0), timeout=30, what="slow"
    )
    os.kill(victim, signal.SIGKILL)
    driver.join(timeout=90)

    assert not driver.is_alive(), workers[0].log_tail()
    [report] = reports
    assert report.record.status == "finished"
    assert sorted(r.case for r in report.results) == ["case-0", "case-1", "case-2"]
    assert all(s.passed for r in report.results for s in r.scores), report.results
    stored = client.runtime.client.hgetall(client.runtime.keys.eval_results(record.id))
    assert len(stored) == 3  # one result per case run, however it was delivered
    assert eval_store(client).report(record.id).results == report.results
    for result in report.results:
        assert result.run_id is not None
        assert client.status(result.run_id).status == RunStatus.SUCCEEDED
        assert client.runtime.client.hget(executions_key(result.run_id), "after") == "1"
    kinds = [e.kind for r in report.results for e in client.events(r.run_id or "", follow=False)]
    assert "node.takeover" in kinds  # the kill did land under a case's node
