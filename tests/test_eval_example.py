"""The shipped example as a newcomer runs it: offline, in one command, on an embedded
stack and a fake Messages API of the command's own; again, with the judge answering from
its cache; then with another model against the first eval, a regression found."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import cli_env, dagwright

SUITE = "examples/evals/suite.yaml"
SCRIPT = "examples/evals/fake-llm.yaml"

pytestmark = pytest.mark.slow


def test_the_example_runs_offline_caches_its_verdicts_and_finds_a_regression(
    tmp_path: Path,
) -> None:
    env = cli_env(None, tmp_path / "data", COLUMNS="80")

    first = dagwright("eval", SUITE, "--fake-llm", SCRIPT, env=env, timeout=240)
    assert first.returncode == 0, first.stderr
    assert "judge: 3 verdict(s) asked, 0 from the cache" in first.stdout
    assert "fake LLM: 6 request(s) answered" in first.stderr  # 3 writers, 3 verdicts
    assert "✗ raft / one-paragraph" in first.stdout
    assert all(len(line) <= 80 for line in first.stdout.splitlines())

    again = dagwright("eval", SUITE, "--fake-llm", SCRIPT, env=env, timeout=240)
    assert again.returncode == 0, again.stderr
    assert "judge: 0 verdict(s) asked, 3 from the cache, $0.0000" in again.stdout
    assert "fake LLM: 3 request(s) answered" in again.stderr  # the writers only

    cheaper = dagwright(
        "eval",
        SUITE,
        "--fake-llm",
        SCRIPT,
        "--model",
        "claude-haiku-4-5",
        "--baseline",
        "latest",
        env=env,
        timeout=240,
    )
    assert cheaper.returncode == 1, cheaper.stderr
    assert "regressed: clear, contains:XADD" in cheaper.stdout
    assert "✗ redis-streams got worse: clear, contains:XADD" in cheaper.stdout
    assert "was: Redis streams are an append-only log" in cheaper.stdout
    assert "now: Redis streams are a feature of Redis" in cheaper.stdout


def test_fake_llm_refuses_a_stack_its_workers_would_not_see(tmp_path: Path) -> None:
    env = cli_env(None, tmp_path / "data", DAGWRIGHT_REDIS_URL="redis://127.0.0.1:1/0")

    result = dagwright("eval", SUITE, "--fake-llm", SCRIPT, env=env)

    assert result.returncode == 2
    assert "--fake-llm starts a local stack of its own" in result.stderr
