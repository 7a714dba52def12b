"""Trigger rules (``run_if``) end to end: a real Celery worker, a real Valkey, the real
``dagwright`` command for a bad plan."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dagwright import (
    Client,
    PlanBuilder,
    PlanError,
    RunFailedError,
    RunHandle,
    RunStatus,
    Settings,
)
from tests.support.cli import cli_env, dagwright, json_out, one_error_line
from tests.support.functions import fixed_key, release_key
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("worker")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "plans"
FAILED_ON_PURPOSE = {"error_class": "PermanentError", "message": "the disk is full"}


def failing_branch_with_handler(plan: PlanBuilder) -> None:
    work = plan.function("work", "fail", params={"message": "the disk is full"})
    plan.function("after", "noop", depends_on=[work])
    plan.function("cleanup", "echo_inputs", depends_on=[work], run_if="any_failed")
    plan.function("side", "concat", params={"parts": ["side", "done"]})


def test_a_failing_branch_runs_its_handler_and_the_run_still_fails(client: Client) -> None:
    plan = PlanBuilder()
    failing_branch_with_handler(plan)
    run = client.submit(plan.build())
    with pytest.raises(RunFailedError, match="node 'work'"):
        run.result(timeout=30)
    state = run.status()
    assert state.status == RunStatus.FAILED
    assert {nid: n.status.value for nid, n in state.nodes.items()} == {
        "work": "failed",
        "after": "blocked",
        "cleanup": "succeeded",
        "side": "succeeded",
    }
    assert state.nodes["cleanup"].output == {
        "work": {"status": "failed", "error": FAILED_ON_PURPOSE}
    }


def test_all_done_runs_after_a_mix_of_outcomes(client: Client) -> None:
    plan = PlanBuilder()
    ok = plan.function("ok", "concat", params={"parts": ["ok"]})
    bad = plan.function("bad", "fail", params={"message": "the disk is full"})
    plan.function("report", "echo_inputs", depends_on=[ok, bad], run_if="all_done")
    state = client.submit(plan.build()).wait(timeout=30)
    assert state.status == RunStatus.FAILED
    assert state.nodes["report"].output == {
        "ok": {"status": "succeeded", "output": "ok"},
        "bad": {"status": "failed", "error": FAILED_ON_PURPOSE},
    }


def test_a_handler_is_skipped_when_all_succeed_and_the_run_succeeds(client: Client) -> None:
    plan = PlanBuilder()
    work = plan.function("work", "concat", params={"parts": ["all good"]})
    cleanup = plan.function("cleanup", "echo_inputs", depends_on=[work], run_if="any_failed")
    plan.function("notify", "echo_inputs", depends_on=[cleanup])
    run = client.submit(plan.build())
    assert run.result(timeout=30) == "all good"  # handlers are not default outputs
    state = run.status()
    assert state.nodes["cleanup"].status.value == "skipped"
    assert state.nodes["notify"].status.value == "skipped"
    assert (state.counts.skipped, state.counts.succeeded) == (2, 1)


def test_a_handler_downstream_of_a_handler_gets_its_output(client: Client) -> None:
    plan = PlanBuilder()
    work = plan.function("work", "fail", params={"message": "the disk is full"})
    cleanup = plan.function("cleanup", "echo_inputs", depends_on=[work], run_if="any_failed")
    plan.function("notify", "echo_inputs", depends_on=[cleanup])
    state = client.submit(plan.build()).wait(timeout=30)
    assert state.status == RunStatus.FAILED
    cleaned = {"work": {"status": "failed", "error": FAILED_ON_PURPOSE}}
    assert state.nodes["notify"].output == {"cleanup": cleaned}  # a plain input: all_succeeded


def test_a_replayed_failure_reruns_its_branch_and_skips_its_handler(client: Client) -> None:
    plan = PlanBuilder()
    fix = plan.function("fix", "broken_until_fixed")
    plan.function("after", "concat", depends_on=[fix], params={"parts": ["after"]})
    plan.function("cleanup", "echo_inputs", depends_on=[fix], run_if="any_failed")
    run = client.submit(plan.build())
    state = run.wait(timeout=30)
    assert state.status == RunStatus.FAILED and state.nodes["cleanup"].status.value == "succeeded"
    [letter] = client.dlq.list(run_id=run.run_id)
    client.runtime.client.set(fixed_key(run.run_id), 1)  # the cause, fixed
    client.dlq.replay(letter.id)
    state = run.wait(timeout=30)
    assert state.status == RunStatus.SUCCEEDED and state.result == "after fixed"
    assert {nid: n.status.value for nid, n in state.nodes.items()} == {
        "fix": "succeeded",
        "after": "succeeded",
        "cleanup": "skipped",
    }
    assert state.nodes["cleanup"].output is None  # its run for the old failure is undone
    assert (state.counts.failed, state.counts.skipped, state.counts.done) == (0, 1, 3)


def test_the_example_plan_cleans_up_after_its_failure(client: Client) -> None:
    state = client.submit(EXAMPLES / "cleanup_on_failure.yaml").wait(timeout=30)
    assert state.status == RunStatus.FAILED
    assert state.nodes["cleanup"].status.value == "succeeded"
    assert state.nodes["alert"].status.value == "succeeded"
    assert state.nodes["publish"].status.value == "blocked"


def test_a_bad_run_if_is_refused_with_a_clear_problem(client: Client) -> None:
    plan = PlanBuilder()
    work = plan.function("work", "noop")
    plan.node("cleanup", "function", function="noop", depends_on=[work], run_if="sometimes")
    with pytest.raises(
        PlanError, match=re.escape("node 'cleanup'.run_if: Input should be 'all_succeeded'")
    ):
        plan.build()
    lone = {
        "nodes": [{"id": "alone", "type": "function", "function": "noop", "run_if": "all_done"}]
    }
    with pytest.raises(PlanError, match="node 'alone' sets run_if: all_done but has no depends_on"):
        client.submit(lone)


def test_the_cli_refuses_a_bad_run_if_in_one_line(settings: Settings, tmp_path: Path) -> None:
    plan = tmp_path / "bad.yaml"
    plan.write_text(
        "nodes:\n"
        "  - {id: work, type: function, function: noop}\n"
        "  - {id: cleanup, type: function, function: noop, depends_on: [work], run_if: on_error}\n"
    )
    result = dagwright("run", str(plan), env=cli_env(settings, tmp_path))
    assert result.returncode == 2
    assert "node 'cleanup'.run_if" in one_error_line(result)


def test_status_shows_skipped_nodes_and_a_handlers_output(
    client: Client, settings: Settings, tmp_path: Path
) -> None:
    plan = PlanBuilder()
    work = plan.function("work", "fail", params={"message": "the disk is full"})
    plan.function("cleanup", "echo_inputs", depends_on=[work], run_if="any_failed")
    plan.function("quiet", "noop", depends_on=[work], run_if="any_failed")
    plan.function("fine", "noop")
    plan.function("unneeded", "noop", depends_on=["fine"], run_if="any_failed")
    run = client.submit(plan.build())
    run.wait(timeout=30)
    env = cli_env(settings, tmp_path)
    shown = json_out(dagwright("status", run.run_id, "--json", env=env))
    assert shown["status"] == "failed" and shown["counts"]["skipped"] == 1
    assert shown["nodes"]["unneeded"]["status"] == "skipped"
    assert shown["nodes"]["cleanup"]["output"]["work"]["status"] == "failed"
    text = dagwright("status", run.run_id, env=env)
    assert "1 skipped" in text.stdout
    assert "unneeded" in text.stdout and "skipped" in text.stdout


def test_the_trace_counts_skipped_nodes(client: Client, settings: Settings, tmp_path: Path) -> None:
    plan = PlanBuilder()
    work = plan.function("work", "noop")
    plan.function("cleanup", "noop", depends_on=[work], run_if="any_failed")
    run = client.submit(plan.build())
    run.wait(timeout=30)
    shown = dagwright("trace", run.run_id, env=cli_env(settings, tmp_path))
    assert shown.returncode == 0, shown.stderr
    assert "2 nodes (1 skipped) · 1 attempts" in shown.stdout


# --- none_failed and one_success ---------------------------------------------------------


def node_states(run: RunHandle) -> dict[str, str]:
    return {nid: n.status.value for nid, n in run.status().nodes.items()}


def release(client: Client, run: RunHandle) -> None:
    client.runtime.client.set(release_key(run.run_id), 1)


def test_none_failed_runs_after_a_success_and_a_skipped_dependency(client: Client) -> None:
    plan = PlanBuilder()
    work = plan.function("work", "concat", params={"parts": ["built"]})
    cleanup = plan.function("cleanup", "noop", depends_on=[work], run_if="any_failed")
    plan.function("publish", "echo_inputs", depends_on=[work, cleanup], run_if="none_failed")
    run = client.submit(plan.build())
    assert run.result(timeout=30) == "built"  # a handler: not a default output
    assert node_states(run) == {"work": "succeeded", "cleanup": "skipped", "publish": "succeeded"}
    assert run.status().nodes["publish"].output == {
        "work": {"status": "succeeded", "output": "built"},
        "cleanup": {"status": "skipped"},
    }


def test_none_failed_is_blocked_at_the_first_failure_while_the_rest_still_runs(
    client: Client,
) -> None:
    plan = PlanBuilder()
    bad = plan.function("bad", "fail", params={"message": "the disk is full"})
    slow = plan.function("slow", "held_until_released")
    publish = plan.function("publish", "noop", depends_on=[bad, slow], run_if="none_failed")
    plan.function("announce", "noop", depends_on=[publish])
    run = client.submit(plan.build())
    blocked_while_slow_runs = {
        "bad": "failed",
        "slow": "running",  # under load it may still be queued when publish is blocked
        "publish": "blocked",
        "announce": "blocked",
    }
    wait_until(lambda: node_states(run) == blocked_while_slow_runs, timeout=30, what="blocked")
    release(client, run)
    assert run.wait(timeout=30).status == RunStatus.FAILED
    assert node_states(run)["slow"] == "succeeded"


def test_one_success_starts_while_another_dependency_still_runs(client: Client) -> None:
    plan = PlanBuilder()
    fast = plan.function("fast", "concat", params={"parts": ["first"]})
    slow = plan.function("slow", "held_until_released")
    pick = plan.function("pick", "echo_inputs", depends_on=[fast, slow], run_if="one_success")
    plan.function("use", "echo_inputs", depends_on=[pick])
    run = client.submit(plan.build())
    wait_until(lambda: node_states(run)["use"] == "succeeded", timeout=30, what="use done")
    # slow cannot end before the release: pick (and what needs it) did not wait for it
    assert node_states(run)["slow"] == "running"
    picked = run.status().nodes["pick"].output
    assert picked["fast"] == {"status": "succeeded", "output": "first"}
    assert picked["slow"] in ({"status": "queued"}, {"status": "running"})  # no output yet
    release(client, run)
    state = run.wait(timeout=30)
    assert state.status == RunStatus.SUCCEEDED and state.nodes["slow"].output == "released"
    assert state.nodes["pick"].output == picked  # it ran once, with what it had then


def test_one_success_is_blocked_when_every_dependency_failed(client: Client) -> None:
    plan = PlanBuilder()
    one = plan.function("one", "fail", params={"message": "the disk is full"})
    two = plan.function("two", "fail", params={"message": "the disk is full"})
    pick = plan.function("pick", "echo_inputs", depends_on=[one, two], run_if="one_success")
    plan.function("use", "noop", depends_on=[pick])
    run = client.submit(plan.build())
    assert run.wait(timeout=30).status == RunStatus.FAILED
    assert node_states(run) == {
        "one": "failed",
        "two": "failed",
        "pick": "blocked",
        "use": "blocked",
    }


def test_one_success_is_skipped_when_every_dependency_was_skipped(client: Client) -> None:
    plan = PlanBuilder()
    work = plan.function("work", "noop")
    cleanup = plan.function("cleanup", "noop", depends_on=[work], run_if="any_failed")
    plan.function("pick", "echo_inputs", depends_on=[cleanup], run_if="one_success")
    run = client.submit(plan.build())
    assert run.wait(timeout=30).status == RunStatus.SUCCEEDED
    assert node_states(run) == {"work": "succeeded", "cleanup": "skipped", "pick": "skipped"}


def test_a_replay_runs_the_one_success_and_none_failed_nodes_its_failure_blocked(
    client: Client,
) -> None:
    plan = PlanBuilder()
    fix = plan.function("fix", "broken_until_fixed")
    bad = plan.function("bad", "fail", params={"message": "the disk is full"})
    plan.function("pick", "echo_inputs", depends_on=[fix, bad], run_if="one_success")
    plan.function("publish", "echo_inputs", depends_on=[fix], run_if="none_failed")
    run = client.submit(plan.build())
    assert run.wait(timeout=30).status == RunStatus.FAILED
    assert node_states(run) == {
        "fix": "failed",
        "bad": "failed",
        "pick": "blocked",
        "publish": "blocked",
    }
    [letter] = [d for d in client.dlq.list(run_id=run.run_id) if d.node_id == "fix"]
    client.runtime.client.set(fixed_key(run.run_id), 1)  # the cause, fixed
    client.dlq.replay(letter.id)
    state = run.wait(timeout=30)
    assert state.status == RunStatus.FAILED  # bad still failed
    assert node_states(run) == {
        "fix": "succeeded",
        "bad": "failed",
        "pick": "succeeded",
        "publish": "succeeded",
    }
    assert state.nodes["pick"].output == {
        "fix": {"status": "succeeded", "output": "fixed"},
        "bad": {"status": "failed", "error": FAILED_ON_PURPOSE},
    }
    assert state.nodes["publish"].output == {"fix": {"status": "succeeded", "output": "fixed"}}
