"""Idempotency keys on submit: a repeated submit follows the first run, even when the
repeats race each other."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from dagwright import Client, PlanError, Settings
from dagwright.errors import IdempotencyConflictError
from dagwright.orchestrator.control.submission import IdempotencyKeys
from dagwright.orchestrator.runtime import Runtime
from tests.support.cli import cli_env, dagwright, json_out, one_error_line

NOOP = {"nodes": [{"id": "a", "type": "function", "function": "noop"}]}


def run_count(client: Client) -> int:
    return len(client.runtime.store.list_runs(1000))


def test_the_same_key_returns_the_first_run(no_worker_settings: Settings) -> None:
    client = Client(no_worker_settings)
    first = client.submit(NOOP, idempotency_key="nightly-2026-11-23")
    again = client.submit(NOOP, idempotency_key="nightly-2026-11-23")
    other = client.submit(NOOP, idempotency_key="nightly-2026-11-24")
    unkeyed = [client.submit(NOOP), client.submit(NOOP)]
    assert again.run_id == first.run_id
    assert len({first.run_id, other.run_id, *(run.run_id for run in unkeyed)}) == 4
    assert run_count(client) == 4


def test_racing_submits_with_one_key_start_one_run(no_worker_settings: Settings) -> None:
    client = Client(no_worker_settings)
    assert client.runtime and client.broker  # built once, before the threads share them
    start = threading.Barrier(8)
    found: list[str] = []

    def submit() -> None:
        start.wait(10)
        found.append(client.submit(NOOP, idempotency_key="burst").run_id)

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(found) == 8 and len(set(found)) == 1
    assert run_count(client) == 1


def test_a_refused_submit_does_not_take_the_key(no_worker_settings: Settings) -> None:
    client = Client(no_worker_settings)
    with pytest.raises(PlanError):
        client.submit({"nodes": [{"id": "a", "type": "nope"}]}, idempotency_key="k")
    assert client.submit(NOOP, idempotency_key="k").run_id  # the key is still free


def test_a_claim_whose_run_never_appeared_is_taken_over(no_worker_settings: Settings) -> None:
    runtime = Runtime.from_settings(no_worker_settings)
    keys = IdempotencyKeys(runtime)
    assert keys.claim("crashed", "run-that-was-never-written") == "run-that-was-never-written"
    # Its submitter died between the claim and the write: the next one takes the key.
    assert keys.claim("crashed", "the-next-run") == "the-next-run"


@pytest.mark.subprocess
def test_run_takes_an_idempotency_key(
    settings: Settings, redis_client: object, worker: object, tmp_path: Path
) -> None:
    env = cli_env(settings, tmp_path / "data")
    plan = "examples/plans/diamond.yaml"
    first = json_out(dagwright("run", plan, "--json", "--idempotency-key", "k1", env=env))
    second = json_out(dagwright("run", plan, "--json", "--idempotency-key", "k1", env=env))
    assert first["run_id"] == second["run_id"] and second["status"] == "succeeded"


def test_a_key_reused_with_another_plan_is_refused_naming_the_run(
    no_worker_settings: Settings,
) -> None:
    client = Client(no_worker_settings)
    first = client.submit(NOOP, idempotency_key="nightly")
    other = {"nodes": [{"id": "b", "type": "function", "function": "noop"}]}
    with pytest.raises(IdempotencyConflictError) as refused:
        client.submit(other, idempotency_key="nightly")
    assert refused.value.run_id == first.run_id
    assert first.run_id in str(refused.value)
    with pytest.raises(IdempotencyConflictError):  # the same plan asking for more
        client.submit(NOOP, idempotency_key="nightly", timeout_s=60)
    assert client.submit(NOOP, idempotency_key="nightly").run_id == first.run_id
    assert run_count(client) == 1


def test_a_goal_reused_with_another_goal_is_refused(no_worker_settings: Settings) -> None:
    client = Client(no_worker_settings)
    first = client.submit(goal="count the words", idempotency_key="g")
    assert client.submit(goal="count the words", idempotency_key="g").run_id == first.run_id
    with pytest.raises(IdempotencyConflictError):
        client.submit(goal="count the letters", idempotency_key="g")


def test_run_with_a_reused_key_and_another_plan_exits_2_naming_the_run(
    no_worker_settings: Settings, tmp_path: Path
) -> None:
    env = cli_env(no_worker_settings, tmp_path / "data")
    key = ("--idempotency-key", "k1", "--no-wait", "--json")
    first = json_out(dagwright("run", "examples/plans/diamond.yaml", *key, env=env))
    other = tmp_path / "other.json"
    other.write_text('{"nodes": [{"id": "b", "type": "function", "function": "noop"}]}')
    refused = dagwright("run", str(other), *key, env=env)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    line = one_error_line(refused)
    assert first["run_id"] in line and "another plan or goal" in line
