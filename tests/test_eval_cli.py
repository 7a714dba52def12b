"""`dagwright eval` and `dagwright evals` as a person and a CI job use them: the table in
80 columns, --json, JUnit XML, exit codes (1 under the pass-rate floor, 2 for a bad suite)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from dagwright import Settings
from dagwright.keys import Keys
from tests.support.cli import cli_env, dagwright, json_out, one_error_line

GREETING = Path(__file__).parent.parent / "examples" / "plans" / "greeting_inputs.yaml"

pytestmark = pytest.mark.usefixtures("worker")


def write_suite(tmp_path: Path, **overrides: Any) -> Path:
    suite: dict[str, Any] = {
        "name": "greeting",
        "plan": str(GREETING),
        "scorers": [
            {"contains": {"value": "hello", "node": "greet"}},
            {"equals": {"value": "hello Ada", "node": "greet", "name": "is-ada"}},
        ],
        "cases": [
            {"name": "ada", "inputs": {"name": "Ada"}},
            {"name": "grace", "inputs": {"name": "Grace"}},
        ],
    }
    suite.update(overrides)
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(suite))
    return path


def env_of(settings: Settings, tmp_path: Path, **extra: str) -> dict[str, str]:
    return cli_env(settings, tmp_path / "data", **extra)


def test_eval_prints_cases_by_scorers_within_80_columns(
    settings: Settings, redis_client: redis.Redis, tmp_path: Path
) -> None:
    result = dagwright(
        "eval", str(write_suite(tmp_path)), env=env_of(settings, tmp_path, COLUMNS="80")
    )

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), result.stdout
    assert lines[0].startswith("eval ev_") and "  greeting  2 case(s)  finished in" in lines[0]
    ada = next(line for line in lines if line.startswith("ada"))
    grace = next(line for line in lines if line.startswith("grace"))
    assert ada.split()[1:4] == ["ok", "✓", "✓"]
    assert grace.split()[1:4] == ["ok", "✓", "✗"]
    assert any("is-ada" in line and "1/2" in line and "50%" in line for line in lines)
    assert "✗ grace / is-ada: expected hello Ada, got hello Grace" in result.stdout
    assert "[2/2]" in result.stderr  # progress, on stderr


def test_eval_json_and_junit_for_ci(
    settings: Settings, redis_client: redis.Redis, tmp_path: Path
) -> None:
    junit = tmp_path / "report.xml"
    result = dagwright(
        "eval",
        str(write_suite(tmp_path)),
        "--json",
        "--junit",
        str(junit),
        env=env_of(settings, tmp_path),
    )

    assert result.returncode == 0, result.stderr
    report = json_out(result)
    assert report["record"]["suite"] == "greeting"
    assert [s["scorer"] for s in report["stats"]] == ["contains:hello", "is-ada"]
    assert report["stats"][1]["pass_rate"] == 0.5
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "1", "0")
    failed = [case for case in suite.iter("testcase") if case.find("failure") is not None]
    assert [(c.get("classname"), c.get("name")) for c in failed] == [("greeting.grace", "is-ada")]


def test_a_pass_rate_under_the_floor_exits_1(
    settings: Settings, redis_client: redis.Redis, tmp_path: Path
) -> None:
    suite = str(write_suite(tmp_path))
    env = env_of(settings, tmp_path)

    assert dagwright("eval", suite, "--min-pass-rate", "0.5", env=env).returncode == 0
    below = dagwright("eval", suite, "--min-pass-rate", "0.9", env=env)
    assert below.returncode == 1
    assert "pass rate below 90%: is-ada" in below.stderr


@pytest.mark.parametrize(
    ("change", "wanted"),
    [
        ({"cases": []}, "cases: List should have at least 1 item"),
        ({"scorers": [{"contans": "x"}]}, "scorers.0: no scorer kind 'contans'"),
        ({"scorers": [{"regex": "(a)\\1"}]}, "scorers.0 (regex): pattern: RE2 cannot use"),
        ({"plan": "nowhere.yaml"}, "no such plan file"),
        (
            {"cases": [{"name": "x", "inputs": {"name": 3}}]},
            "case x: input 'name': 3 is not of type 'string'",
        ),
    ],
)
def test_a_bad_suite_is_one_line_and_exit_2(
    settings: Settings,
    redis_client: redis.Redis,
    tmp_path: Path,
    change: dict[str, Any],
    wanted: str,
) -> None:
    result = dagwright("eval", str(write_suite(tmp_path, **change)), env=env_of(settings, tmp_path))

    assert result.returncode == 2, result.stdout + result.stderr
    assert wanted in one_error_line(result)


def test_a_plan_no_case_can_run_is_refused_before_any_run(
    settings: Settings, redis_client: redis.Redis, tmp_path: Path
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("goal: g\nnodes: [{id: a, type: function, function: nowhere}]\n")
    result = dagwright(
        "eval",
        str(write_suite(tmp_path, plan=str(plan), cases=[{"name": "ada"}])),
        env=env_of(settings, tmp_path),
    )

    assert result.returncode == 2
    assert "case ada: node 'a': function 'nowhere' is not registered" in one_error_line(result)
    assert redis_client.zcard(Keys(settings.redis.key_prefix).run_index) == 0


def test_bad_flags_are_exit_2(
    settings: Settings, redis_client: redis.Redis, tmp_path: Path
) -> None:
    suite, env = str(write_suite(tmp_path)), env_of(settings, tmp_path)

    for args, wanted in [
        (["--set", "nonode.model=x"], "the plan has no node 'nonode'"),
        (["--set", "greet"], "write NODE.FIELD=VALUE"),
        (["--case", "nobody"], "no case named 'nobody'"),
        (["--baseline", "ev_0000000000000000000"], "no eval 'ev_0000000000000000000'"),
    ]:
        result = dagwright("eval", suite, *args, env=env)
        assert result.returncode == 2, (args, result.stderr)
        assert wanted in one_error_line(result), args
    assert "give a suite file" in one_error_line(dagwright("eval", env=env))


def test_evals_list_and_show(settings: Settings, redis_client: redis.Redis, tmp_path: Path) -> None:
    env = env_of(settings, tmp_path)
    first = json_out(dagwright("eval", str(write_suite(tmp_path)), "--json", env=env))
    eval_id = first["record"]["id"]

    listed = json_out(dagwright("evals", "list", "--json", env=env))
    assert [e["id"] for e in listed] == [eval_id] and "suite_data" not in listed[0]
    table = dagwright("evals", "list", env=env).stdout
    assert eval_id in table and "2/2" in table and "75%" in table
    shown = json_out(dagwright("evals", "show", eval_id, "--json", env=env))
    assert shown["results"] == first["results"]
    missing = dagwright("evals", "show", "ev_nope", env=env)
    assert missing.returncode == 2 and "no eval 'ev_nope'" in one_error_line(missing)
    assert (
        json.loads(dagwright("evals", "list", "--json", "--suite", "other", env=env).stdout) == []
    )


def test_an_interrupted_eval_is_resumed_following_the_runs_it_started(
    settings: Settings, redis_client: redis.Redis, tmp_path: Path
) -> None:
    import signal
    import subprocess
    import sys
    import time

    from tests.support.processes import REPO_ROOT
    from tests.support.waiting import wait_until

    plan = tmp_path / "slow.yaml"
    plan.write_text(
        "goal: slow\noutput: slow\nnodes:\n"
        "  - {id: slow, type: function, function: count, params: {seconds: 3}}\n"
    )
    suite = write_suite(
        tmp_path,
        plan=str(plan),
        scorers=[{"equals": "slow"}],
        cases=[{"name": "one"}, {"name": "two"}],
    )
    env = env_of(settings, tmp_path)
    driver = subprocess.Popen(
        [sys.executable, "-m", "dagwright", "eval", str(suite), "-I", "tests.support.functions"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    index = Keys(settings.redis.key_prefix).run_index
    try:
        wait_until(lambda: redis_client.zcard(index) == 2, timeout=30, what="both runs")
    except AssertionError:
        driver.kill()
        raise AssertionError(driver.communicate()) from None
    started = time.monotonic()
    driver.send_signal(signal.SIGINT)
    _, stderr = driver.communicate(timeout=30)
    assert time.monotonic() - started < 5  # it does not wait for the runs to end
    assert driver.returncode == 130, stderr
    eval_id = stderr.split("dagwright eval --resume ")[1].split("`")[0]
    listed = json_out(dagwright("evals", "list", "--json", env=env))
    assert [(e["id"], e["status"]) for e in listed] == [(eval_id, "interrupted")]
    runs_before = set(redis_client.zrange(index, 0, -1))

    functions = ("-I", "tests.support.functions")
    refused = dagwright("eval", "--resume", eval_id, "--repeat", "2", *functions, env=env)
    assert "--resume goes on with the eval as it started: drop --repeat" in one_error_line(refused)
    resumed = dagwright("eval", "--resume", eval_id, "--json", *functions, env=env)

    assert resumed.returncode == 0, resumed.stderr
    report = json_out(resumed)
    assert report["record"]["status"] == "finished"
    assert {r["run_id"] for r in report["results"]} == runs_before  # no new run paid for
    assert all(r["scores"][0]["passed"] for r in report["results"])
