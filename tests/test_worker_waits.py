"""A run waiting because no live worker serves a queue it needs says so (issue 34): in
``status`` (text and --json), the progress line of ``run``, ``watch``, the API's run and
node JSON; with no worker alive at all, and with workers alive that do not consume the
node's queue (naming it and the command that starts one). Real Valkey, real workers."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

from dagwright import AsyncClient, Client, PlanBuilder, Settings
from dagwright.cli.output import progress_line
from dagwright.cli.runview import RunView
from dagwright.keys import worker_type_of_queue
from dagwright.models import NodeStatus, NodeWait, RunState, RunStatus
from tests.support.api_server import running_server
from tests.support.cli import cli_env, dagwright, json_out
from tests.support.processes import Workers
from tests.support.waiting import wait_until

NO_WORKER = "waiting for a worker: no live worker (start dagwright up, or dagwright worker)"
NO_FUNCTION_WORKER = (
    "waiting for a worker: no live worker consumes dw.function "
    "(start one: dagwright worker --type function)"
)
NO_ORCHESTRATOR = (
    "waiting for a worker: no live worker consumes dw.orchestrator "
    "(start one: dagwright worker --type orchestrator)"
)


def two_steps() -> PlanBuilder:
    plan = PlanBuilder("two steps")
    first = plan.function("first", "concat", params={"parts": ["a"]})
    plan.function("second", "concat", depends_on=[first])
    return plan


def worker_waits(state: RunState) -> dict[str, NodeWait]:
    return {
        node_id: node.waiting
        for node_id, node in state.nodes.items()
        if node.waiting is not None and node.waiting.on in ("worker", "queue")
    }


def test_a_run_submitted_with_no_live_worker_says_so_in_status(
    no_worker_settings: Settings,
) -> None:
    client = Client(no_worker_settings)
    run = client.submit(two_steps().build())
    state = client.status(run.run_id)
    waits = worker_waits(state)
    assert list(waits) == ["first"]  # the pending one waits on `first`, not on a worker
    assert (waits["first"].on, waits["first"].name) == ("worker", "dw.function")
    assert waits["first"].describe().startswith(NO_WORKER + " (queued ")
    assert state.nodes["first"].status == NodeStatus.QUEUED


def test_the_async_client_says_why_too(no_worker_settings: Settings) -> None:
    async def status() -> RunState:
        async with AsyncClient(no_worker_settings) as client:
            run = await client.submit(two_steps().build())
            return await client.status(run.run_id)

    waits = worker_waits(asyncio.run(status()))
    assert list(waits) == ["first"]
    assert waits["first"].describe().startswith(NO_WORKER)


def test_status_text_and_json_say_why_a_run_waits(
    no_worker_settings: Settings, tmp_path: Path
) -> None:
    run = Client(no_worker_settings).submit(two_steps().build())
    env = cli_env(no_worker_settings, tmp_path)
    text = dagwright("status", run.run_id, env=env)
    assert text.returncode == 0, text.stderr
    assert "no live worker (start dagwright up, or dagwright worker)" in text.stdout
    shown = json_out(dagwright("status", run.run_id, "--json", env=env))
    waiting = shown["nodes"]["first"]["waiting"]
    assert {key: waiting[key] for key in ("on", "name", "until", "worker_type")} == {
        "on": "worker",
        "name": "dw.function",
        "until": None,
        "worker_type": "function",
    }
    assert waiting["description"].startswith(NO_WORKER)
    assert datetime.fromisoformat(waiting["since"]) <= datetime.now(UTC)
    assert shown["nodes"]["second"]["waiting"] is None


def test_the_progress_line_and_watch_say_why(no_worker_settings: Settings) -> None:
    client = Client(no_worker_settings)
    run = client.submit(two_steps().build())
    status, counts = client.counts(run.run_id)
    line = progress_line(run.run_id, status, counts, 1.0, client.waits(run.run_id))
    assert f"· first {NO_WORKER}" in line
    view = RunView(client.status(run.run_id, include_outputs=False), max_rows=20)
    hints = [str(hint) for hint in view.render(20, datetime.now(UTC).timestamp()).renderables]
    assert any(f"first · {NO_WORKER}" in hint for hint in hints), hints


def test_the_api_run_and_node_json_say_why(no_worker_settings: Settings) -> None:
    with running_server(no_worker_settings) as api, api.http("read") as http:
        run_id = api.client.submit(two_steps().build()).run_id
        run = http.get(f"/api/v1/runs/{run_id}").json()
        assert run["nodes"]["first"]["waiting"]["description"].startswith(NO_WORKER)
        node = http.get(f"/api/v1/runs/{run_id}/nodes/first").json()  # the dashboard's panel
        assert node["waiting"]["description"].startswith(NO_WORKER)


def test_a_queue_no_live_worker_consumes_is_named_until_a_worker_for_it_starts(
    subprocess_settings: Settings, workers: Workers
) -> None:
    client = Client(subprocess_settings)
    run = client.submit(two_steps().build())  # no worker yet: accepted, waits
    workers.start(subprocess_settings, args=("-t", "orchestrator"))

    def named() -> NodeWait | None:
        return worker_waits(client.status(run.run_id)).get("first")

    wait = wait_until(lambda: (w := named()) and w.on == "queue" and w, timeout=60)
    assert wait.describe().startswith(NO_FUNCTION_WORKER + " (queued ")
    assert f"first {NO_FUNCTION_WORKER}" in " ".join(
        f"{node} {w.describe()}" for node, w in client.waits(run.run_id).items()
    )
    workers.start(subprocess_settings, args=("-t", "function"))
    state = run.wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, workers.log_tails()
    assert worker_waits(client.status(run.run_id)) == {}


def test_nodes_queued_behind_busy_workers_of_their_queue_are_not_flagged(
    subprocess_settings: Settings, workers: Workers
) -> None:
    workers.start(subprocess_settings, concurrency=1, args=("-t", "function"))
    client = Client(subprocess_settings)
    wait_until(lambda: client.live_workers.read(fresh=True), timeout=60, what="a live worker")
    plan = PlanBuilder("busy")
    for index in range(4):
        plan.function(f"slow{index}", "count", params={"seconds": 0.5})
    run = client.submit(plan.build())
    seen_queued, deadline = False, time.monotonic() + 60
    while not (state := client.status(run.run_id)).status.is_final:
        assert time.monotonic() < deadline, workers.log_tails()
        seen_queued |= any(n.status == NodeStatus.QUEUED for n in state.nodes.values())
        assert worker_waits(state) == {}
        assert client.waits(run.run_id) == {}
    assert seen_queued and state.status == RunStatus.SUCCEEDED, workers.log_tails()


def test_a_goal_waiting_for_the_planner_names_the_orchestrator_queue(
    subprocess_settings: Settings, workers: Workers
) -> None:
    client = Client(subprocess_settings)
    run = client.submit(goal="plan something")  # no worker yet: accepted
    workers.start(subprocess_settings, args=("-t", "function"))

    def named() -> NodeWait | None:
        wait = worker_waits(client.status(run.run_id)).get("_plan")
        return wait if wait is not None and wait.on == "queue" else None

    wait = wait_until(named, timeout=60, what="the planner's node named as waiting")
    assert wait.describe().startswith(NO_ORCHESTRATOR)


def test_the_worker_type_of_each_queue() -> None:
    assert worker_type_of_queue("dw.coder") == "coder"
    assert worker_type_of_queue("dw.function:gpu") == "function:gpu"
    assert worker_type_of_queue("dw.orchestrator") == "orchestrator"


def test_a_node_queued_a_moment_ago_is_not_yet_said_to_wait(
    no_worker_settings: Settings,
) -> None:
    settings = no_worker_settings.model_copy(update={"worker_wait_grace_s": 2.0})
    client = Client(settings)
    run = client.submit(two_steps().build())

    assert worker_waits(client.status(run.run_id)) == {}  # its worker may be starting
    assert client.waits(run.run_id) == {}
    waits = wait_until(lambda: worker_waits(client.status(run.run_id)), timeout=10)
    assert list(waits) == ["first"] and waits["first"].on == "worker"
