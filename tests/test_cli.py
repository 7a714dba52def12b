"""The ``dagwright`` command as users run it: real subprocesses, real Valkey and workers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from dagwright import Client, RunStatus
from dagwright.llm.messages_api_rules import min_cacheable_tokens
from dagwright.settings import Settings
from dagwright.stackfile import read_stack
from dagwright.testing import FakeAnthropicServer
from dagwright.testing.fake_anthropic_script import text_of
from dagwright.testing.fake_anthropic_tokens import prompt_blocks
from tests.support.cli import cli_env, dagwright, json_out, one_error_line
from tests.support.processes import REPO_ROOT
from tests.support.waiting import wait_until

DIAMOND = "examples/plans/diamond.yaml"
CYCLE = "examples/plans/cycle.yaml"


@pytest.fixture
def env(settings: Settings, redis_client: object, worker: object, tmp_path: Path) -> dict[str, str]:
    return cli_env(settings, tmp_path / "data")


def write_plan(tmp_path: Path, text: str) -> str:
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    return str(path)


SLEEPER = """
nodes:
  - {id: nap, type: function, function: sleep, params: {seconds: 60}}
  - {id: after, type: function, function: noop, depends_on: [nap]}
"""


@pytest.mark.subprocess
def test_run_json_prints_one_object_with_every_node(env: dict[str, str]) -> None:
    result = dagwright("run", DIAMOND, "--json", env=env)
    assert result.returncode == 0, result.stderr
    out = json_out(result)
    assert {"run_id", "status", "nodes", "result"} <= out.keys()
    assert out["status"] == "succeeded" and out["result"] == "left hello + right hello"
    assert out["nodes"]["b"]["output"] == "left hello"
    assert {"status", "output", "attempts", "started_at", "finished_at"} <= out["nodes"]["a"].keys()
    assert out["nodes"]["a"]["attempts"] == 1 and out["nodes"]["a"]["finished_at"]


@pytest.mark.subprocess
def test_run_for_people_prints_the_result_and_a_summary(env: dict[str, str]) -> None:
    result = dagwright("run", DIAMOND, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "left hello + right hello\n"
    assert "succeeded" in result.stderr and "4/4 nodes succeeded" in result.stderr


@pytest.mark.subprocess
def test_a_cycle_exits_2_with_one_line_naming_it(env: dict[str, str]) -> None:
    result = dagwright("run", CYCLE, env=env)
    assert result.returncode == 2
    assert one_error_line(result) == (
        f"{CYCLE}: dependency cycle a -> b -> c -> a: remove one of these dependencies"
    )


@pytest.mark.subprocess
def test_a_plan_with_several_problems_shows_the_first_and_points_at_validate(
    env: dict[str, str], tmp_path: Path
) -> None:
    plan = write_plan(
        tmp_path,
        "nodes:\n  - {id: a, type: function, function: concat, depends_on: [ghost]}\n"
        "  - {id: a, type: no-such-type}\n",
    )
    result = dagwright("run", plan, env=env)
    assert result.returncode == 2
    assert one_error_line(result).endswith(
        f"(and 2 more problems: `dagwright validate {plan}` lists them)"
    )
    listed = dagwright("validate", plan, env=env)
    assert listed.returncode == 2 and listed.stderr.count("\n  - ") == 3


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "missing.yaml"], "no such plan file: missing.yaml"),
        (["status", "nosuchrun"], "no run 'nosuchrun' here"),
        (["worker", "--type", "nonsense"], "unknown worker type(s) nonsense"),
        (["run", DIAMOND, "--import", "no_such_module"], "cannot import 'no_such_module'"),
    ],
)
def test_input_errors_exit_2_with_one_line(
    env: dict[str, str], args: list[str], message: str
) -> None:
    result = dagwright(*args, env=env)
    assert result.returncode == 2
    assert message in one_error_line(result)


@pytest.mark.subprocess
def test_a_failed_run_exits_1_naming_the_node(env: dict[str, str], tmp_path: Path) -> None:
    plan = write_plan(
        tmp_path,
        "nodes:\n  - {id: boom, type: function, function: fail, params: {message: disk full}}\n",
    )
    result = dagwright("run", plan, env=env)
    assert result.returncode == 1
    assert "failed" in result.stderr and "boom" in result.stderr and "disk full" in result.stderr
    assert "Traceback" not in result.stderr
    out = json_out(dagwright("run", plan, "--json", env=env))
    assert out["status"] == "failed"
    assert out["nodes"]["boom"]["error"] == {"class": "PermanentError", "message": "disk full"}


@pytest.mark.subprocess
def test_no_wait_then_status_result_events_and_runs(env: dict[str, str]) -> None:
    submitted = json_out(dagwright("run", DIAMOND, "--no-wait", "--json", env=env))
    run_id = submitted["run_id"]
    result = dagwright("result", run_id, "--wait", "--timeout", "30", env=env)
    assert (result.returncode, result.stdout) == (0, "left hello + right hello\n")
    status = json_out(dagwright("status", run_id, "--json", env=env))
    assert status["status"] == "succeeded" and status["counts"]["succeeded"] == 4
    human = dagwright("status", run_id, env=env)
    assert run_id in human.stdout and "succeeded" in human.stdout
    events = dagwright("events", run_id, "--json", env=env).stdout.splitlines()
    assert '"kind": "run.submitted"' in events[0] and '"kind": "run.succeeded"' in events[-1]
    parsed = [json.loads(line) for line in events]
    assert parsed[0]["data"] == {"nodes": 4}  # numbers as numbers
    running = [e["data"] for e in parsed if e["kind"] == "node.running"]
    assert running and all(isinstance(data["attempt"], int) for data in running)
    listed = json_out(dagwright("runs", "--json", env=env))
    assert run_id in [run["run_id"] for run in listed]


@pytest.mark.subprocess
def test_result_of_an_unfinished_run_exits_3(env: dict[str, str], tmp_path: Path) -> None:
    run_id = json_out(
        dagwright("run", write_plan(tmp_path, SLEEPER), "--no-wait", "--json", env=env)
    )["run_id"]
    result = dagwright("result", run_id, env=env)
    assert result.returncode == 3
    assert "is still running" in one_error_line(result)
    dagwright("cancel", run_id, env=env)


@pytest.mark.subprocess
def test_run_timeout_exits_3_and_the_run_goes_on(env: dict[str, str], tmp_path: Path) -> None:
    result = dagwright("run", write_plan(tmp_path, SLEEPER), "--timeout", "1", env=env)
    assert result.returncode == 3
    progress, error = result.stderr.strip().splitlines()  # no terminal: one plain progress line
    assert progress.startswith("run ") and "0/2 nodes done" in progress
    assert error.startswith("error: run ") and "still running after 1s" in error
    assert "dagwright status" in error
    dagwright("cancel", error.split()[2], env=env)  # it went on: free the session's worker


@pytest.mark.subprocess
def test_cancel_a_running_run(env: dict[str, str], tmp_path: Path) -> None:
    run_id = json_out(
        dagwright("run", write_plan(tmp_path, SLEEPER), "--no-wait", "--json", env=env)
    )["run_id"]
    wait_until(
        lambda: (
            json_out(dagwright("status", run_id, "--json", env=env))["nodes"]["nap"]["status"]
            == "running"
        ),
        timeout=30,
    )
    result = dagwright("cancel", run_id, env=env)
    assert (result.returncode, result.stdout) == (0, f"run {run_id} cancelled\n")
    status = json_out(dagwright("status", run_id, "--json", env=env))
    assert status["status"] == "cancelled" and status["nodes"]["after"]["started_at"] is None
    again = dagwright("cancel", run_id, env=env)
    assert again.stdout == f"run {run_id} had already cancelled; nothing to cancel\n"
    assert dagwright("result", run_id, env=env).returncode == 1


@pytest.mark.subprocess
def test_validate(env: dict[str, str]) -> None:
    ok = dagwright("validate", DIAMOND, env=env)
    assert (ok.returncode, ok.stdout) == (0, f"{DIAMOND}: valid, 4 nodes, roots: a\n")
    assert dagwright("validate", CYCLE, env=env).returncode == 2


def test_validate_lists_every_problem_and_its_json_is_json(tmp_path: Path) -> None:
    env = cli_env(None, tmp_path / "data")
    plan = tmp_path / "plan.json"
    plan.write_text(
        '{"output": "q", "nodes": [{"id": "a", "type": "nope", "depends_on": ["zz"]},'
        ' {"id": "b", "type": "function", "function": "not_there"}]}'
    )
    text = dagwright("validate", str(plan), env=env)
    assert text.returncode == 2 and text.stdout == ""
    lines = text.stderr.splitlines()
    assert lines[0] == f"error: {plan}: 4 problems:"
    assert len(lines) == 5 and all(line.startswith("  - ") for line in lines[1:])
    assert "(and" not in text.stderr
    as_json = dagwright("validate", str(plan), "--json", env=env)
    assert as_json.returncode == 2 and as_json.stderr == ""
    report = json_out(as_json)
    assert report["valid"] is False and report["file"] == str(plan)
    assert [f"  - {problem}" for problem in report["problems"]] == lines[1:]
    assert any("not_there" in problem for problem in report["problems"])
    missing = json_out(dagwright("validate", str(tmp_path / "none.yaml"), "--json", env=env))
    assert missing == {
        "valid": False,
        "file": str(tmp_path / "none.yaml"),
        "problems": [f"no such plan file: {tmp_path / 'none.yaml'}"],
    }


@pytest.mark.subprocess
def test_an_unreachable_redis_exits_4_with_one_line(tmp_path: Path) -> None:
    env = cli_env(None, tmp_path / "data", DAGWRIGHT_REDIS_URL="redis://127.0.0.1:1/0")
    for args in (["status", "anything"], ["run", DIAMOND]):
        result = dagwright(*args, env=env, timeout=60)
        assert result.returncode == 4, result.stderr
        assert "cannot reach Redis at redis://127.0.0.1:1/0" in one_error_line(result)


@pytest.mark.subprocess
def test_commands_other_than_run_need_a_stack(tmp_path: Path) -> None:
    result = dagwright("status", "anything", env=cli_env(None, tmp_path / "data"))
    assert result.returncode == 2
    assert "no stack is running and no Redis is configured" in one_error_line(result)
    assert "`dagwright up`" in one_error_line(result)


@pytest.mark.subprocess
def test_run_with_nothing_configured_uses_the_embedded_stack(tmp_path: Path) -> None:
    env = cli_env(None, tmp_path / "data")
    result = dagwright("run", DIAMOND, "--json", env=env, timeout=180)
    assert result.returncode == 0, result.stderr
    assert json_out(result)["status"] == "succeeded"
    assert read_stack(tmp_path / "data") is None  # stopped with the command
    log = (tmp_path / "data" / "logs" / "worker.log").read_text()
    assert "Traceback" not in log and "WorkerLostError" not in log, log  # a warm shutdown
    assert dagwright("run", "--no-wait", DIAMOND, env=env).returncode == 2


@pytest.mark.subprocess
def test_up_serves_other_commands_until_interrupted(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = cli_env(None, data)
    up = subprocess.Popen(
        [sys.executable, "-m", "dagwright", "up", "--concurrency", "2", "--loglevel", "WARNING"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        record = wait_until(lambda: read_stack(data), timeout=60, what="the stack file")
        assert record.owner == "up" and record.redis_url.startswith("unix://")
        assert oct(os.stat(data / "stack.json").st_mode & 0o777) == "0o600"
        run_id = json_out(dagwright("run", DIAMOND, "--no-wait", "--json", env=env))["run_id"]
        result = dagwright("result", run_id, "--wait", "--timeout", "60", env=env)
        assert (result.returncode, result.stdout) == (0, "left hello + right hello\n"), (
            result.stderr
        )
        second = dagwright("up", env=env)
        assert second.returncode == 2 and "already running" in one_error_line(second)
    finally:
        up.send_signal(signal.SIGINT)
        try:
            _, stderr = up.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            up.kill()
            raise
    assert up.returncode == 0, stderr
    assert read_stack(data) is None
    assert "Traceback" not in stderr and "WorkerLostError" not in stderr, stderr


@pytest.mark.subprocess
def test_ctrl_c_while_run_waits_prints_the_run_id_and_how_to_follow_it(
    subprocess_settings: Settings, tmp_path: Path
) -> None:
    """No worker runs: the run waits, and the person gives up waiting, not the run."""
    env = cli_env(subprocess_settings, tmp_path / "data")
    waiting = subprocess.Popen(
        [sys.executable, "-m", "dagwright", "run", DIAMOND],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    client = Client(subprocess_settings)
    try:
        assert waiting.stderr is not None
        progress = waiting.stderr.readline()  # it waits now, showing progress
        [run] = client.list_runs()
        assert progress.startswith(f"run {run.run_id} running"), progress
    finally:
        waiting.send_signal(signal.SIGINT)
        stdout, stderr = waiting.communicate(timeout=60)
    assert waiting.returncode == 130 and stdout == ""
    assert (
        f"interrupted: run {run.run_id} goes on; follow it with `dagwright watch {run.run_id}`, "
        f"stop it with `dagwright cancel {run.run_id}`"
    ) in stderr
    assert "Traceback" not in stderr
    assert client.counts(run.run_id)[0] == RunStatus.RUNNING


@pytest.mark.subprocess
def test_a_one_word_goal_runs_with_goal_flag(env: dict[str, str]) -> None:
    result = dagwright("run", "--goal", "diamond", "--no-wait", env=env)
    assert result.returncode == 0, result.stderr  # submitted to the planner
    assert result.stdout.strip() and "\n" not in result.stdout.strip()  # the run id


@pytest.mark.subprocess
def test_the_wordstats_example_runs_with_its_own_functions(tmp_path: Path) -> None:
    result = dagwright(
        "run",
        "examples/wordstats/plan.yaml",
        "--import",
        "examples.wordstats.functions",
        env=cli_env(None, tmp_path / "data"),
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "left: 12 words (7 distinct); right: 11 words (11 distinct); longest: left\n"
    )


RESEARCH = "examples/plans/research.yaml"


@pytest.mark.subprocess
def test_an_llm_plan_without_an_api_key_fails_fast_with_one_clear_line(tmp_path: Path) -> None:
    result = dagwright("run", RESEARCH, "--json", env=cli_env(None, tmp_path / "data"), timeout=180)
    if result.returncode == 2:  # the stack's workers said they have no LLM before the submit
        [line] = result.stderr.strip().splitlines()
        assert "nor has this environment: set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL" in line
        assert "and run again" in line
        return
    assert result.returncode == 1
    research = json_out(result)["nodes"]["research"]
    assert research["attempts"] == 1  # no retries: nothing could have worked
    assert research["error"]["class"] == "LLMNotConfiguredError"
    assert research["error"]["message"].startswith("no Anthropic API key: set ANTHROPIC_API_KEY")


@contextmanager
def fake_llm_cli(script: str, env: dict[str, str]) -> Iterator[str]:
    """`dagwright fake-llm --script SCRIPT` in a subprocess; yields its base URL."""
    fake = subprocess.Popen(
        [sys.executable, "-m", "dagwright", "fake-llm", "--script", script],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert fake.stdout is not None
        line = fake.stdout.readline()
        assert line.startswith("fake Anthropic API listening on http://127.0.0.1:"), line
        yield line.split()[5]
    finally:
        fake.send_signal(signal.SIGINT)
        assert fake.wait(30) == 0


@pytest.mark.subprocess
def test_the_research_example_runs_offline_against_dagwright_fake_llm(tmp_path: Path) -> None:
    env = cli_env(None, tmp_path / "data")
    with fake_llm_cli("examples/fake-llm/research.yaml", env) as base_url:
        result = dagwright(
            "run", RESEARCH, env={**env, "ANTHROPIC_BASE_URL": base_url}, timeout=180
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Redis streams give backend engineers a durable")
    assert "tokens · $" in result.stderr  # the summary shows the spend


@pytest.mark.subprocess
def test_the_goal_example_is_planned_and_run_offline(tmp_path: Path) -> None:
    env = cli_env(None, tmp_path / "data")
    goal = "Compare Redis streams and Kafka for our event bus"
    with fake_llm_cli("examples/fake-llm/goal.yaml", env) as base_url:
        result = dagwright(
            "run", goal, "--json", env={**env, "ANTHROPIC_BASE_URL": base_url}, timeout=180
        )
    assert result.returncode == 0, result.stderr
    out = json_out(result)
    assert set(out["nodes"]) == {"_plan", "redis-streams", "kafka", "synthesis"}
    assert out["result"].startswith("Choose Redis streams for a modest")
    assert out["usage"]["llm_calls"] == 4
    # Each researcher gets its own answer, though the goal (naming both) reaches each.
    assert out["nodes"]["redis-streams"]["output"].startswith("Redis streams: simple to run")
    assert out["nodes"]["kafka"]["output"].startswith("Kafka: partitioned, disk-backed")


def fake_llm_log(base_url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{base_url}/_log", timeout=10) as answer:
        return list(json.load(answer))


@pytest.mark.subprocess
def test_the_readme_flows_run_again_and_again_against_one_fake_llm(tmp_path: Path) -> None:
    """The README's offline flows as a person repeats them: plan, then run, then run again,
    against one `dagwright fake-llm`, which refuses what the real API would refuse."""
    env = cli_env(None, tmp_path / "data")
    goal = "Compare Redis streams and Kafka for our event bus"
    with fake_llm_cli("examples/fake-llm/goal.yaml", env) as base_url:
        llm_env = {**env, "ANTHROPIC_BASE_URL": base_url}
        planned = dagwright("plan", goal, env=llm_env, timeout=180)
        assert planned.returncode == 0, planned.stderr
        for _ in range(2):
            ran = dagwright("run", goal, "--json", env=llm_env, timeout=180)
            assert ran.returncode == 0, ran.stderr
            assert json_out(ran)["result"].startswith("Choose Redis streams for a modest")
        goal_log = fake_llm_log(base_url)
    with fake_llm_cli("examples/fake-llm/research.yaml", env) as base_url:
        for _ in range(2):
            ran = dagwright("run", RESEARCH, env={**env, "ANTHROPIC_BASE_URL": base_url})
            assert ran.returncode == 0, ran.stderr
        research_log = fake_llm_log(base_url)
    calls = [one for one in goal_log + research_log if one["endpoint"] == "messages"]
    assert len(calls) == 1 + 2 * 4 + 2 * 4  # plan; two goal runs; two research runs
    assert {one["status"] for one in goal_log + research_log} == {200}
    # A breakpoint only where its prefix reaches the model's minimum (4,096 tokens on
    # Sonnet 5.5): the researchers' and the writer's prompts are shorter, and carry none.
    assert all(breakpoints_pay(one["body"]) for one in calls)
    workers = [one for one in calls if "You are the planner" not in json.dumps(one["body"])]
    assert workers and not any("cache_control" in json.dumps(one["body"]) for one in workers)


def breakpoints_pay(body: dict[str, Any]) -> bool:
    """Whether every cache breakpoint of ``body`` ends a prefix the model would cache."""
    minimum, prefix = min_cacheable_tokens(body["model"]), 0
    for block in prompt_blocks(body):
        prefix += block.tokens
        if block.ttl is not None and prefix < minimum:
            return False
    return True


@pytest.mark.subprocess
def test_worker_types_lists_every_type(env: dict[str, str]) -> None:
    listed = json_out(dagwright("worker-types", "--json", env=env))
    by_name = {row["name"]: row for row in listed}
    assert set(by_name) >= {"function", "researcher", "writer", "analyst", "coder", "reviewer"}
    assert by_name["researcher"]["queue"] == "dw.researcher"
    assert by_name["researcher"]["model"] == "claude-sonnet-5-5"
    assert "http_get" in by_name["researcher"]["tools"]
    # No allowed domains, web tools off: declared, but not offered to its model here.
    assert {"http_get", "web_search", "web_fetch"} <= set(by_name["researcher"]["not_offered"])
    assert not any(line.startswith("http_get:") for line in by_name["researcher"]["capabilities"])
    human = dagwright("worker-types", env={**env, "COLUMNS": "80"}).stdout
    assert "http_get (off here)" in human and "workspace_write" in human  # never cut
    assert by_name["function"]["kind"] == "function" and by_name["function"]["model"] is None


def plan_entry(*nodes: dict[str, object], output: str | None = None) -> dict[str, object]:
    plan: dict[str, object] = {"goal": "g", "nodes": list(nodes)}
    if output:
        plan["output"] = output
    return {
        "match": {"system_contains": "You are the planner"},
        "reply": {"content": [{"type": "tool_use", "name": "submit_plan", "input": plan}]},
    }


@pytest.mark.subprocess
def test_plan_shows_the_tree_and_json_without_redis_or_a_run(
    tmp_path: Path, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        plan_entry(
            {"id": "pros", "type": "researcher", "instruction": "List the pros."},
            {"id": "cons", "type": "researcher", "instruction": "List the cons."},
        )
    )
    env = cli_env(
        None, tmp_path / "data", ANTHROPIC_BASE_URL=fake_llm.base_url, ANTHROPIC_API_KEY="k"
    )
    result = dagwright("plan", "Weigh Redis streams", "--max-nodes", "5", env=env)
    assert result.returncode == 0, result.stderr
    tree, _, text = result.stdout.partition("\n\n")
    assert "pros researcher List the pros." in tree and "synthesis writer" in tree
    assert "← output" in tree
    assert json.loads(text)["output"] == "synthesis"
    assert "3 nodes, planned · " in result.stderr and "tokens" in result.stderr
    assert "Limits: at most 5 nodes" in text_of(fake_llm.requests[0].body["messages"][0]["content"])
    assert not (tmp_path / "data").exists()  # no stack, no run, no Redis

    fake_llm.reset()
    fake_llm.add(
        plan_entry({"id": "only", "type": "writer", "instruction": "Write."}, output="only")
    )
    as_json = json_out(dagwright("plan", "Write", "--json", env=env))
    assert as_json == {
        "goal": "g",
        "output": "only",
        "nodes": [{"id": "only", "type": "writer", "instruction": "Write."}],
    }


@pytest.mark.subprocess
def test_run_a_goal_through_the_planner(env: dict[str, str], fake_llm: FakeAnthropicServer) -> None:
    fake_llm.add(
        plan_entry({"id": "note", "type": "writer", "instruction": "Write a note."}, output="note"),
        {
            "match": {"system_contains": "You are the writer"},
            "reply": {"content": [{"type": "text", "text": "the note"}]},
        },
    )
    result = dagwright(
        "run", "Write a note about streams", "--json", "--worker-types", "writer,analyst", env=env
    )
    assert result.returncode == 0, result.stderr
    out = json_out(result)
    assert out["status"] == "succeeded" and out["result"] == "the note"
    assert set(out["nodes"]) == {"_plan", "note"}
    catalog = text_of(fake_llm.requests[0].body["messages"][0]["content"])
    assert "- writer (agent)" in catalog and "- analyst (agent)" in catalog
    assert "researcher" not in catalog


@pytest.mark.subprocess
def test_run_a_goal_with_context_shows_it_to_every_agent(
    env: dict[str, str], fake_llm: FakeAnthropicServer
) -> None:
    context = "Our brokers run in two regions; cite the Redis docs."
    fake_llm.add(
        plan_entry(
            {"id": "pros", "type": "researcher", "instruction": "List the pros."},
            {"id": "cons", "type": "researcher", "instruction": "List the cons."},
        ),
        *(
            {
                "match": {"system_contains": f"You are the {role}", "last_user_contains": when},
                "reply": {"content": [{"type": "text", "text": says}]},
            }
            for role, when, says in (
                ("researcher", "List the pros", "fast"),
                ("researcher", "List the cons", "costly"),
                ("writer", "Combine the results", "fast but costly"),
            )
        ),
    )
    result = dagwright("run", "Weigh Redis streams", "--context", context, "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert json_out(result)["result"] == "fast but costly"
    # The planner has it in its message; the workers in the run's system block.
    prompts = [
        text_of(r.body["system"]) + text_of(r.body["messages"][0]["content"])
        for r in fake_llm.requests
    ]
    assert len(prompts) == 4 and all(context in prompt for prompt in prompts)


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "x " * 5_001], "the goal is 10001 characters; the limit is 10000"),
        (["run", "diamond"], "no such plan file: diamond"),  # a mistyped name, not a goal
        (["run", ""], "nothing to run: give a plan file, or a goal in words"),
        (
            ["run", "do it", "--context", "c" * 50_001],
            "the context is 50001 characters; the limit is 50000 (DAGWRIGHT_MAX_CONTEXT_CHARS)",
        ),
        (["run", "do it", "-w", "wizard"], "unknown worker type(s) wizard"),
        (["run", DIAMOND, "--max-nodes", "3"], "--max-nodes apply to goals, not to the plan file"),
        (["run", "missing-plan.yaml"], "no such plan file: missing-plan.yaml"),
        (["plan", "   "], "the goal is empty"),
    ],
)
def test_goal_guardrails_exit_2_with_one_line(
    env: dict[str, str], args: list[str], message: str
) -> None:
    result = dagwright(*args, env=env)
    assert result.returncode == 2
    assert message in one_error_line(result)
