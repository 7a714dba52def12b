"""`dagwright eval --baseline` as a CI gate: a case that got worse exits 1 and is named
with both outputs; an eval that held exits 0; the JSON carries the comparison."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dagwright import Settings
from tests.support.cli import cli_env, dagwright, json_out
from tests.support.processes import Workers

GREETING = Path(__file__).parent.parent / "examples" / "plans" / "greeting_inputs.yaml"


def suite_file(tmp_path: Path, grace_is: str) -> Path:
    """Two cases graded by ``is-ada``; ``grace`` greets ``grace_is`` (the change tried)."""
    suite: dict[str, Any] = {
        "name": "greeting",
        "plan": str(GREETING),
        "scorers": [{"equals": {"value": "hello Ada", "node": "greet", "name": "is-ada"}}],
        "cases": [
            {"name": "ada", "inputs": {"name": "Ada"}},
            {"name": "grace", "inputs": {"name": grace_is}},
        ],
    }
    path = tmp_path / f"suite-{grace_is}.yaml"
    path.write_text(yaml.safe_dump(suite))
    return path


def test_a_case_that_got_worse_fails_the_gate_and_is_named_with_both_outputs(
    subprocess_settings: Settings, workers: Workers, tmp_path: Path
) -> None:
    # A worker of its own: in CI the session's in-process worker (shared by the files of
    # one pytest process) left this file's first eval unanswered for 120 s, three runs in
    # three, never alone; what held it is not known yet
    workers.start(subprocess_settings)
    env = cli_env(subprocess_settings, tmp_path / "data", COLUMNS="80")
    first = dagwright("eval", str(suite_file(tmp_path, "Ada")), "--json", env=env)
    assert first.returncode == 0, first.stderr
    baseline = json_out(first)["record"]["id"]

    worse = dagwright("eval", str(suite_file(tmp_path, "Grace")), "--baseline", baseline, env=env)

    assert worse.returncode == 1, worse.stdout + worse.stderr
    lines = worse.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), worse.stdout
    verdict = f"against {baseline} (its suite differed): regressed: is-ada (worse in grace)"
    assert verdict in " ".join(worse.stdout.split())
    at = lines.index("✗ grace got worse: is-ada")
    was, now = lines[at + 1 : at + 3]  # the run's result: every node's output
    assert was.startswith("  was: {") and '"greet": "hello Ada"' in was
    assert now.startswith("  now: {") and '"greet": "hello Grace"' in now
    assert not any(line.startswith("✗ ada got worse") for line in lines)

    held = dagwright("eval", str(suite_file(tmp_path, "Grace")), "--baseline", "latest", env=env)
    assert held.returncode == 0, held.stdout + held.stderr
    assert "no regression" in held.stdout  # the newest finished eval: the same change

    saved = tmp_path / "baseline.json"
    saved.write_text(first.stdout)
    gated = dagwright(
        "eval", str(suite_file(tmp_path, "Grace")), "--baseline", str(saved), "--json", env=env
    )
    assert gated.returncode == 1
    comparison = json_out(gated)["comparison"]
    assert comparison["regressions"] == ["is-ada"]
    [grace] = [case for case in comparison["cases"] if case["worse"]]
    assert grace["case"] == "grace" and "hello Grace" in grace["output"]
    assert "hello Ada" in grace["baseline_output"]
