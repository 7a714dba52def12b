"""Flower: node tasks read well in Celery's event stream, and ``dagwright flower`` serves
them behind basic auth (a real Flower subprocess against the test Valkey)."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.app import DagwrightCelery
from dagwright.keys import node_task_id
from dagwright.tasks import build_app
from tests.support.cli import cli_env, dagwright, one_error_line
from tests.support.processes import REPO_ROOT, settings_env
from tests.support.valkey import free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("worker")

LOGIN = "ops:s3cret-Fl0wer"


def two_nodes() -> PlanBuilder:
    plan = PlanBuilder("seen in flower")
    first = plan.function("first", "count")
    plan.function("second", "count", depends_on=[first])
    return plan


@contextmanager
def task_events(app: DagwrightCelery) -> Iterator[list[dict[str, Any]]]:
    """Every event on the broker's event stream while inside, read by Celery's own
    receiver (what Flower runs); ready once a probe event of ours came back."""
    events: list[dict[str, Any]] = []
    with app.connection() as connection:
        receiver = app.events.Receiver(connection, handlers={"*": events.append})
        listening = threading.Thread(target=receiver.capture, kwargs={"wakeup": False}, daemon=True)
        listening.start()
        with app.events.default_dispatcher() as dispatcher:

            def probe_came_back() -> bool:
                dispatcher.send("test-probe")
                return any(event["type"] == "test-probe" for event in events)

            wait_until(probe_came_back, timeout=30, interval=0.2, what="the event receiver")
        try:
            yield events
        finally:
            receiver.should_stop = True
            listening.join(10)


def test_node_tasks_carry_their_run_node_and_worker_type_in_celery_events(
    client: Client, settings: Settings
) -> None:
    app = build_app(settings)
    with task_events(app) as events:
        run = client.submit(two_nodes().build(output="second"))
        assert run.wait(timeout=60).status == RunStatus.SUCCEEDED
        task_id = node_task_id(run.run_id, "second", 1)

        def of_task(kind: str) -> dict[str, Any] | None:
            return next((e for e in events if e["type"] == kind and e["uuid"] == task_id), None)

        sent, received = wait_until(
            lambda: (
                (of_task("task-sent"), of_task("task-received"))
                if of_task("task-sent") and of_task("task-received") and of_task("task-succeeded")
                else None
            ),
            timeout=30,
            what="the events of the second node's task",
        )
    readable = f"run={run.run_id} node=second type=function fence=1"
    for event in (sent, received):
        assert event["name"] == "dagwright.node.execute"
        assert event["args"] == readable and event["kwargs"] == "{}"


def get(url: str, login: str | None = None, *, post: bool = False) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=b"{}" if post else None)
    if login:
        request.add_header("Authorization", "Basic " + base64.b64encode(login.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return 0, b""  # not listening yet


class FlowerProcess:
    """``dagwright flower ARGS`` with the test settings and a login, logging to a file."""

    def __init__(self, settings: Settings, log_path: Path, *args: str) -> None:
        self.log_path = log_path
        env = settings_env(settings) | {"DAGWRIGHT_FLOWER_BASIC_AUTH": LOGIN}
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "dagwright", "flower", *args],
                cwd=REPO_ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        return self.process.returncode


def test_dagwright_flower_requires_its_login_and_lists_node_tasks_readably(
    client: Client, settings: Settings, tmp_path: Path
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}/ops/flower"
    flower = FlowerProcess(
        settings, tmp_path / "flower.log",
        "--port", str(port), "--address", "127.0.0.1", "--url-prefix", "ops/flower",
    )  # fmt: skip
    try:
        wait_until(lambda: get(f"{base}/api/workers")[0], timeout=60, what="flower listening")
        assert get(f"{base}/api/workers")[0] == 401
        assert get(f"{base}/api/workers", "ops:wrong")[0] == 401
        assert get(f"{base}/", LOGIN)[0] == 200
        cmdline = Path(f"/proc/{flower.process.pid}/cmdline").read_bytes()
        assert b"s3cret" not in cmdline  # the password is on no command line

        run = client.submit(two_nodes().build(output="second"))
        assert run.wait(timeout=60).status == RunStatus.SUCCEEDED

        def tasks_of_run() -> dict[str, Any]:
            status, body = get(f"{base}/api/tasks?search=run%3D{run.run_id}", LOGIN)
            tasks = json.loads(body) if status == 200 else {}
            done = [t for t in tasks.values() if t.get("state") == "SUCCESS"]
            return tasks if len(done) == 2 else {}

        tasks = wait_until(tasks_of_run, timeout=60, interval=0.5, what="the run's tasks")
        task = tasks[node_task_id(run.run_id, "first", 1)]
        assert task["name"] == "dagwright.node.execute"
        assert task["args"] == f"run={run.run_id} node=first type=function fence=1"
        status, body = get(f"{base}/api/tasks?search=type%3Dfunction", LOGIN)
        assert status == 200 and node_task_id(run.run_id, "second", 1) in json.loads(body)
    finally:
        code = flower.stop()
    log = flower.log_path.read_text()
    assert code == 0, log  # SIGTERM stops it cleanly
    assert f"Flower at http://127.0.0.1:{port}/ops/flower/" in log
    assert "s3cret" not in log
    assert not (REPO_ROOT / "flower").exists()  # Flower keeps no database of its own


# Flower's own login skips /metrics and /healthcheck; static files, the login page and
# unknown paths are Tornado's or Flower's too, and the worker control API is a POST.
EVERY_KIND_OF_ROUTE = (
    "/", "/workers", "/tasks", "/broker", "/metrics", "/healthcheck", "/api/workers",
    "/api/tasks", "/api/task/types", "/api/queues/length", "/static/css/flower.css",
    "/favicon.ico", "/login", "/logout", "/no/such/page",
)  # fmt: skip


def test_every_flower_route_asks_for_the_login_even_metrics_and_healthcheck(
    settings: Settings, tmp_path: Path
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    flower = FlowerProcess(
        settings, tmp_path / "flower.log", "--port", str(port), "--address", "127.0.0.1"
    )
    try:
        wait_until(lambda: get(f"{base}/healthcheck")[0], timeout=60, what="flower listening")
        for path in EVERY_KIND_OF_ROUTE:
            for login in (None, "ops:wrong", LOGIN + "x", "ops"):
                status, body = get(f"{base}{path}", login)
                assert (path, status) == (path, 401) and b"flower_" not in body
        assert get(f"{base}/api/worker/shutdown/nobody", post=True)[0] == 401
        assert get(f"{base}/healthcheck", LOGIN) == (200, b"OK")
        status, body = get(f"{base}/metrics", LOGIN)
        assert status == 200 and b"flower_events_total" in body
    finally:
        code = flower.stop()
    assert code == 0, flower.log_path.read_text()


@pytest.mark.subprocess
def test_dagwright_flower_refuses_to_start_without_a_login(
    settings: Settings, tmp_path: Path
) -> None:
    env = cli_env(settings, tmp_path / "data")
    env.pop("DAGWRIGHT_FLOWER_BASIC_AUTH", None)
    result = dagwright("flower", "--port", str(free_port()), env=env, timeout=60)
    assert result.returncode == 2
    line = one_error_line(result)
    assert "DAGWRIGHT_FLOWER_BASIC_AUTH" in line and "--no-auth" in line
