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
        ({"cases": [{"name": "x", "inputs": {"name": 3}}]}, None),  # a run's problem: exit 0
    ],
)
def test_a_bad_suite_is_one_line_and_exit_2(
    settings: Settings,
    redis_client: redis.Redis,
    tmp_path: Path,
    change: dict[str, Any],
    wanted: str | None,
) -> None:
    result = dagwright("eval", str(write_suite(tmp_path, **change)), env=env_of(settings, tmp_path))

    if wanted is None:
        assert result.returncode == 0, result.stderr
        assert "the run could not start" in result.stdout
        return
    assert result.returncode == 2, result.stdout + result.stderr
    assert wanted in one_error_line(result)


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
