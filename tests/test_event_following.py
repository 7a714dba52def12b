"""Following a run's events across a dead letter's replay, which re-opens an ended run:
real Valkey, a real worker, the real ``dagwright`` command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dagwright import Client, PlanBuilder, RunHandle, RunStatus, Settings
from tests.support.cli import cli_env, dagwright
from tests.support.functions import fixed_key
from tests.support.processes import REPO_ROOT

pytestmark = pytest.mark.usefixtures("worker")

FINAL_KINDS = {"run.succeeded", "run.failed", "run.cancelled"}


def failed_at_fix(client: Client) -> RunHandle:
    """A run whose first node fails for good (so the second is blocked), then ends."""
    plan = PlanBuilder("replayed, then followed")
    fix = plan.function("fix", "broken_until_fixed")
    plan.function("after", "count", depends_on=[fix], params={"seconds": 1.5})
    run = client.submit(plan.build(output="after"))
    assert run.wait(timeout=60).status == RunStatus.FAILED
    return run


def follow_in_cli(env: dict[str, str], run_id: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dagwright", "events", run_id, "--follow", "--json"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_following_a_replayed_run_goes_on_past_its_old_end_to_the_new_one(
    client: Client, settings: Settings, tmp_path: Path
) -> None:
    run = failed_at_fix(client)
    env = cli_env(settings, tmp_path)
    [letter] = client.dlq.list(run_id=run.run_id)
    client.runtime.client.set(fixed_key(run.run_id), 1)  # the cause, fixed
    replayed = dagwright("dlq", "replay", letter.id, env=env)
    assert replayed.returncode == 0, replayed.stderr

    follower = follow_in_cli(env, run.run_id)  # while `after` (1.5 s) still runs
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    kinds = [json.loads(line)["kind"] for line in out.splitlines()]
    assert kinds.index("run.failed") < kinds.index("run.reopened") < kinds.index("node.replayed")
    assert kinds[-1] == "run.succeeded" and kinds.count("run.succeeded") == 1
    assert ("node.succeeded", "after") in [
        (event.kind, event.node) for event in run.events(follow=False)
    ]
    assert [event.kind for event in run.events()] == kinds  # the client follows alike
    assert run.wait(timeout=10).status == RunStatus.SUCCEEDED


def test_a_follower_of_an_ended_run_stops_at_its_end(client: Client) -> None:
    run = failed_at_fix(client)
    kinds = [event.kind for event in run.events()]
    assert kinds[-1] == "run.failed" and FINAL_KINDS & set(kinds[:-1]) == set()
