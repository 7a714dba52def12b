"""Functions on queues of their own, and existing Celery tasks as nodes (issue 20), on
real worker subprocesses: a function declared with ``queue="gpu"`` runs only on a worker
serving ``function:gpu``; an unmodified ``@app.task`` of the user's own Celery app runs as
a node and its result flows to a dependent node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from dagwright import Client, PlanBuilder, Settings
from dagwright.client.catalog import describe_worker_types
from dagwright.doctor import registered_queues
from dagwright.errors import ConfigurationError, UnrunnablePlanError
from dagwright.keys import Keys
from dagwright.models import RunStatus
from dagwright.registry import build_registry
from dagwright.tasks import queues_for
from dagwright.workers import WorkerRegistry
from dagwright.workers.capabilities import WorkerCapabilities
from dagwright.workers.declarations import add_declared, function
from tests.support import celery_user_app
from tests.support.processes import WorkerProcess, Workers
from tests.support.waiting import wait_until

NODES = "tests.support.celery_nodes"
ADD = "tests.support.celery_user_app.add"


def with_nodes(settings: Settings) -> Settings:
    return settings.model_copy(update={"imports": [*settings.process.imports, NODES]})


def start_serving(workers: Workers, settings: Settings, *types: str) -> WorkerProcess:
    """A worker serving ``types`` (with the Celery nodes imported), once it says so."""
    args = (*(flag for name in types for flag in ("-t", name)), "--import", NODES)
    worker = workers.start(settings, concurrency=2, args=args)
    state = redis.Redis.from_url(settings.redis.url or "", decode_responses=True)
    wait_until(
        lambda: any(
            set(types) <= set(WorkerCapabilities.from_json(raw)[0].worker_types)
            for raw in state.hvals(Keys().worker_capabilities)
        ),
        timeout=60,
        what=f"a worker serving {', '.join(types)}",
    )
    return worker


def test_a_function_with_its_own_queue_runs_only_on_a_worker_serving_it(
    subprocess_settings: Settings, workers: Workers
) -> None:
    default = start_serving(workers, subprocess_settings, "function")
    gpu = start_serving(workers, subprocess_settings, "function:gpu")
    client = Client(with_nodes(subprocess_settings))
    plan = PlanBuilder("where")
    for index in range(6):  # the default worker is idle: any node it could take, it would
        plan.function(f"where{index}", "where_it_ran")
    plan.function("after", "noop", depends_on=["where0"])
    run = client.submit(plan.build())
    state = run.wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, workers.log_tails()
    ran_by = {state.nodes[f"where{i}"].output["ppid"] for i in range(6)}
    assert ran_by == {gpu.pid}, (ran_by, default.pid, gpu.pid)


def test_a_plan_on_a_function_queue_no_live_worker_serves_is_refused(
    subprocess_settings: Settings, workers: Workers
) -> None:
    start_serving(workers, subprocess_settings, "function")
    plan = PlanBuilder("where")
    plan.function("where", "where_it_ran")
    with pytest.raises(UnrunnablePlanError) as refused:
        Client(with_nodes(subprocess_settings)).submit(plan.build())
    assert str(refused.value) == (
        "no live worker serves function queue 'gpu': start one with "
        f"`dagwright worker -t function:gpu --import tests.support.functions --import {NODES}`"
    )


def test_an_unmodified_celery_task_runs_as_a_node_feeding_a_dependent(
    subprocess_settings: Settings, workers: Workers, tmp_path: Path
) -> None:
    """Acceptance: ``dagwright.function(add)`` is the one line; ``add`` is the user's."""
    start_serving(workers, subprocess_settings, "function")
    plan = PlanBuilder("celery")
    plan.function("add", ADD, params={"x": 2, "y": 3})
    plan.function("scale", "user_app.scale", params={"values": [1, 2], "factor": 10})
    plan.function("total", "total", depends_on=["add", "scale"])
    run = Client(with_nodes(subprocess_settings)).submit(plan.build())
    assert run.result(timeout=60) == 5 + 10 + 20, workers.log_tails()

    # The user's app still sends its task to its own queue on the shared broker, where
    # dagwright's workers (consuming dw.* only) leave it for the user's workers.
    broker_url = subprocess_settings.redis.broker_url or ""
    with celery_user_app.app.connection_for_write(broker_url) as connection:
        celery_user_app.add.apply_async((1, 2), connection=connection)
    broker = redis.Redis.from_url(broker_url)
    assert run.wait(timeout=5).status == RunStatus.SUCCEEDED  # dagwright's workers ran on
    assert broker.llen("user") == 1
    assert json.loads(broker.lindex("user", 0) or "{}")["headers"]["task"] == ADD
    with users_worker(broker_url, tmp_path / "user-worker.log") as log:  # and it runs there
        wait_until(
            lambda: f"{ADD}[" in log.read_text() and "succeeded" in log.read_text(),
            timeout=60,
            what="the user's worker running add",
        )
    assert broker.llen("user") == 0


@contextmanager
def users_worker(broker_url: str, log_path: Path) -> Iterator[Path]:
    """``celery -A tests.support.celery_user_app worker -Q user``: the user's own worker."""
    env = {**os.environ, "USER_APP_BROKER_URL": broker_url}
    command = [sys.executable, "-m", "celery", "-A", "tests.support.celery_user_app"]
    command += ["worker", "-Q", "user", "-P", "solo", "-l", "INFO", "--without-mingle"]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            yield log_path
        finally:
            process.terminate()
            process.wait(15)


def test_the_users_task_is_left_as_it_was() -> None:
    """Declaring a task returns it unchanged: still the user's app's task, called directly
    or sent with ``.delay()`` to the user's queue."""
    assert function(celery_user_app.add) is celery_user_app.add
    assert celery_user_app.add(1, 2) == 3
    assert celery_user_app.add.app is celery_user_app.app
    assert celery_user_app.add.name == ADD


def test_registered_body_and_name_of_a_task() -> None:
    registry = WorkerRegistry()
    add_declared(registry, [celery_user_app.add, celery_user_app.scale])
    registered = registry.functions.get("user_app.scale")
    assert registered is not None and not registered.params_problems({"values": [1]})
    assert registered.params_problems({"value": 1})  # checked against the task's signature
    assert registry.functions.get(ADD) is not None


def test_queues_for_names_the_function_queues() -> None:
    registry = build_registry(Settings(imports=[NODES]))
    assert queues_for(["function:gpu"], registry) == ["dw.function:gpu"]
    assert "dw.function:gpu" in queues_for(None, registry)  # every queue by default
    with pytest.raises(ConfigurationError, match="function:tpu"):
        queues_for(["function:tpu"], registry)


def test_a_queue_name_that_cannot_be_one_is_refused() -> None:
    def crunch() -> None: ...

    with pytest.raises(ConfigurationError, match="'GPU please' is not a queue name"):
        add_declared(WorkerRegistry(), [function(queue="GPU please")(crunch)])


def test_worker_types_and_doctor_show_the_function_queues() -> None:
    settings = Settings(imports=[NODES])
    rows = {row["name"]: row for row in describe_worker_types(settings)}
    assert rows["function"]["function_queues"] == {"dw.function:gpu": ["where_it_ran"]}
    assert rows["python"]["function_queues"] == {}
    assert registered_queues(build_registry(settings))["dw.function:gpu"] == ["function:gpu"]
