"""Delayed start of runs (``not_before`` / ``countdown_s`` at submit) and of nodes
(``Node.countdown_s``), with the session's real worker and reconciler on a real Valkey:
a delayed node never starts before its time (the server's clock), starts after it, and
says what it waits for until then; cancel and the run timeout end the wait."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from dagwright import AsyncClient, Client, RunStatus
from dagwright.errors import InputError, RunOptionError
from dagwright.models import NodeStatus, Plan, RunState
from dagwright.settings import Settings
from tests.support.api_server import ApiServer
from tests.support.cli import cli_env, dagwright, json_out, one_error_line
from tests.support.functions import executions_key
from tests.support.waiting import server_time_ms, wait_until


def plan(*nodes: dict[str, Any]) -> Plan:
    return Plan.model_validate({"goal": "delayed", "nodes": list(nodes)})


def fn(node_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": node_id, "type": "function", "function": "count", **fields}


def test_a_run_with_a_countdown_waits_then_starts_not_before_its_time(
    client: Client, worker: Any
) -> None:
    handle = client.submit(plan(fn("a")), countdown_s=1.5)
    state = client.status(handle.run_id)
    node = state.nodes["a"]
    assert state.status == RunStatus.RUNNING
    assert node.status == NodeStatus.RETRY_WAIT
    assert node.waiting is not None and node.waiting.on == "delay"
    assert node.waiting.until is not None
    assert node.waiting.describe().startswith(
        f"waiting until {node.waiting.until:%Y-%m-%d %H:%M:%S} UTC"
    )
    due = node.waiting.until
    assert handle.wait(timeout=30).status == RunStatus.SUCCEEDED
    started = client.status(handle.run_id).nodes["a"].started_at
    assert started is not None and started >= due


def test_a_run_not_before_a_moment_given_as_iso_text(
    client: Client, redis_client: redis.Redis, worker: Any
) -> None:
    moment = datetime.fromtimestamp(server_time_ms(redis_client) / 1000, tz=UTC)
    moment += timedelta(seconds=1.5)
    handle = client.submit(plan(fn("a")), not_before=moment.isoformat())
    assert client.status(handle.run_id).nodes["a"].status == NodeStatus.RETRY_WAIT
    assert handle.wait(timeout=30).status == RunStatus.SUCCEEDED
    started = client.status(handle.run_id).nodes["a"].started_at
    assert started is not None and started >= moment.replace(
        microsecond=moment.microsecond // 1000 * 1000
    )


def test_a_node_countdown_counts_from_when_it_is_ready(client: Client, worker: Any) -> None:
    handle = client.submit(plan(fn("a"), fn("b", depends_on=["a"], countdown_s=1.5)))
    waiting = wait_until(
        lambda: client.status(handle.run_id).nodes["b"].waiting, timeout=30, what="b waits"
    )
    assert waiting.on == "delay" and waiting.until is not None
    assert handle.wait(timeout=30).status == RunStatus.SUCCEEDED
    nodes = client.status(handle.run_id).nodes
    a_done, b_started = nodes["a"].finished_at, nodes["b"].started_at
    assert a_done is not None and b_started is not None
    assert b_started >= a_done + timedelta(seconds=1.5)
    assert b_started >= waiting.until


def test_cancel_during_a_delay_ends_it_and_nothing_runs(
    client: Client, redis_client: redis.Redis, worker: Any
) -> None:
    handle = client.submit(plan(fn("a")), countdown_s=60)
    client.cancel(handle.run_id)
    state = client.status(handle.run_id)
    assert state.status == RunStatus.CANCELLED
    assert state.nodes["a"].status == NodeStatus.CANCELLED
    assert state.nodes["a"].waiting is None
    assert redis_client.zcard(client.runtime.keys.run_key(handle.run_id, "retry")) == 0
    assert not redis_client.exists(executions_key(handle.run_id))


def test_the_run_timeout_counts_from_submission_not_from_the_start(
    client: Client, worker: Any
) -> None:
    handle = client.submit(plan(fn("a")), countdown_s=60, timeout_s=1)
    state = handle.wait(timeout=30)
    assert state.status == RunStatus.FAILED
    assert "timed out" in (state.reason or "")
    assert state.nodes["a"].status == NodeStatus.CANCELLED


def test_celery_words_point_to_the_delayed_start_options(client: Client) -> None:
    with pytest.raises(RunOptionError, match="not_before="):
        client.submit(plan(fn("a")), eta="2026-01-01T00:00:00Z")  # type: ignore[call-arg]
    with pytest.raises(RunOptionError, match="countdown_s="):
        client.submit(plan(fn("a")), countdown=5)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"countdown_s": 1, "not_before": "2026-01-01T00:00:00Z"}, "not both"),
        ({"countdown_s": -1}, "countdown_s must be"),
        ({"countdown_s": 10**9}, "DAGWRIGHT_MAX_START_DELAY_S"),
        ({"not_before": "tomorrow"}, "ISO 8601"),
        ({"not_before": "2999-01-01T00:00:00Z"}, "DAGWRIGHT_MAX_START_DELAY_S"),
    ],
)
def test_a_bad_delayed_start_is_refused_before_anything_is_written(
    client: Client, redis_client: redis.Redis, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(InputError, match=message):
        client.submit(plan(fn("a")), **options)
    assert redis_client.zcard(client.runtime.keys.run_index) == 0


def test_the_cli_runs_a_delayed_plan_and_status_says_until_when(
    no_worker_settings: Settings, tmp_path: Path
) -> None:
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text("goal: later\nnodes:\n  - {id: a, type: function, function: noop}\n")
    env = cli_env(no_worker_settings, tmp_path)
    submitted = dagwright(
        "run", str(plan_file), "--countdown", "600", "--no-wait", "--json", env=env
    )
    assert submitted.returncode == 0, submitted.stderr
    run_id = json_out(submitted)["run_id"]
    text = dagwright("status", run_id, env=env)
    assert text.returncode == 0, text.stderr
    assert "waiting until 20" in text.stdout
    shown = json_out(dagwright("status", run_id, "--json", env=env))
    waiting = shown["nodes"]["a"]["waiting"]
    assert waiting["on"] == "delay" and waiting["description"].startswith("waiting until ")

    refused = dagwright("run", str(plan_file), "--countdown", "-1", "--no-wait", env=env)
    assert refused.returncode == 2
    assert "countdown_s must be 0 to" in one_error_line(refused)


def test_the_async_client_delays_a_run_too(no_worker_settings: Settings) -> None:
    async def submit() -> RunState:
        async with AsyncClient(no_worker_settings) as client:
            run = await client.submit(plan(fn("a")), countdown_s=60)
            return await client.status(run.run_id)

    node = asyncio.run(submit()).nodes["a"]
    assert node.status == NodeStatus.RETRY_WAIT
    assert node.waiting is not None and node.waiting.on == "delay"


def test_the_api_submit_body_takes_a_delayed_start(api: ApiServer) -> None:
    body = {"plan": plan(fn("a")).model_dump(mode="json", exclude_defaults=True), "countdown_s": 60}
    with api.http("operate") as http:
        created = http.post("/api/v1/runs", json=body)
        assert created.status_code == 201, created.text
        waiting = created.json()["nodes"]["a"]["waiting"]
        assert waiting["on"] == "delay" and waiting["description"].startswith("waiting until ")
        refused = http.post("/api/v1/runs", json={"plan": body["plan"], "not_before": "soon"})
    assert refused.status_code == 422 and "ISO 8601" in refused.json()["detail"]
    api.client.cancel(created.json()["run_id"])


def test_a_root_nodes_countdown_counts_from_the_submit(no_worker_settings: Settings) -> None:
    client = Client(no_worker_settings)
    run = client.submit(plan(fn("a", countdown_s=30), fn("b")))
    nodes = client.status(run.run_id).nodes
    waiting = nodes["a"].waiting
    assert nodes["a"].status == NodeStatus.RETRY_WAIT and waiting is not None
    assert waiting.name == "countdown" and waiting.until is not None
    assert waiting.until - waiting.since == timedelta(seconds=30)
    assert nodes["b"].status == NodeStatus.QUEUED  # no delay of its own
