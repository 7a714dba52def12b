"""A Celery team's app and dagwright on ONE broker database never control each other:
the team's ``celery control shutdown`` and ``inspect ping`` (run as they would, as
subprocesses of ``celery -A``) see only the team's worker, dagwright's own control (revoke
on cancel, its ``inspect``) reaches only dagwright's, and both keep running. Real Valkey,
real workers of both apps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.keys import node_task_id
from dagwright.tasks import build_app
from tests.support.processes import REPO_ROOT, Workers
from tests.support.waiting import wait_until

TEAM_APP = "tests.support.celery_user_app"
TEAM_WORKER = "team@test"


def team_celery(broker_url: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``celery -A <the team's app> <args>``, as the team types it, on ``broker_url``."""
    return subprocess.run(
        [sys.executable, "-m", "celery", "-A", TEAM_APP, *args],
        env={**os.environ, "USER_APP_BROKER_URL": broker_url},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def team_pinged(broker_url: str) -> set[str]:
    """The workers answering the team's ``celery inspect ping``."""
    answer = team_celery(broker_url, "inspect", "ping", "--json", "--timeout", "2")
    if answer.returncode != 0:  # "No nodes replied within time constraint"
        return set()
    return set(json.loads(answer.stdout))


@contextmanager
def team_worker(broker_url: str, log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The team's own worker on its queue ``user``, named ``team@test``."""
    command = [sys.executable, "-m", "celery", "-A", TEAM_APP, "worker", "-Q", "user"]
    command += ["-P", "solo", "-n", TEAM_WORKER, "-l", "INFO", "--without-mingle"]
    env = {**os.environ, "USER_APP_BROKER_URL": broker_url}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, env=env, cwd=REPO_ROOT, stdout=log, stderr=log)
        try:
            yield process
        finally:
            if process.poll() is None:
                process.terminate()
                process.wait(15)


def dagwright_pinged(settings: Settings) -> set[str]:
    """The workers answering dagwright's own ``inspect ping``."""
    return set(build_app(settings).control.inspect(timeout=2).ping() or {})


def test_a_celery_teams_control_and_inspect_never_reach_dagwrights_workers(
    subprocess_settings: Settings, workers: Workers, tmp_path: Path
) -> None:
    broker_url = subprocess_settings.redis.broker_url or ""
    ours = workers.start(subprocess_settings, concurrency=1)
    ours_name = wait_until(
        lambda: dagwright_pinged(subprocess_settings), timeout=60, what="dagwright's worker"
    )
    with team_worker(broker_url, tmp_path / "team.log") as theirs:
        assert wait_until(
            lambda: team_pinged(broker_url), timeout=60, what="the team's worker"
        ) == {TEAM_WORKER}, ours.log_tail()
        assert dagwright_pinged(subprocess_settings) == ours_name  # and not the team's

        # (exit status 69: a worker shutting down sends no reply)
        team_celery(broker_url, "control", "shutdown", "--timeout", "2")
        theirs.wait(30)  # the team's worker stops, as the team asked
    assert ours.process.poll() is None, ours.log_tail()
    assert dagwright_pinged(subprocess_settings) == ours_name

    client = Client(subprocess_settings)
    after = PlanBuilder("after the team's shutdown")
    after.function("after", "count")
    assert client.submit(after.build()).result(timeout=30) == "after", ours.log_tail()


def test_dagwrights_revoke_on_cancel_still_reaches_its_workers(
    subprocess_settings: Settings, workers: Workers
) -> None:
    workers.start(subprocess_settings, concurrency=1)
    client = Client(subprocess_settings)
    plan = PlanBuilder("one slot, two nodes")
    plan.function("busy", "sleep", params={"seconds": 120})
    plan.function("waiting", "sleep", params={"seconds": 120})
    run = client.submit(plan.build())
    wait_until(lambda: client.counts(run.run_id)[1].running == 1, timeout=60, what="one running")
    queued = next(
        n for n, node in client.status(run.run_id).nodes.items() if node.status == "queued"
    )

    run.cancel()
    inspect = build_app(subprocess_settings).control.inspect(timeout=2)
    wait_until(
        lambda: (
            node_task_id(run.run_id, queued, 1)
            in {task for revoked in (inspect.revoked() or {}).values() for task in revoked}
        ),
        timeout=30,
        what="the queued node's message revoked in dagwright's worker",
    )
    assert client.status(run.run_id).status == RunStatus.CANCELLED
