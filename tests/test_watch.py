"""``dagwright watch``: the live view in a real pseudo-terminal, read through a terminal
emulator; the plain final table when stdout is no terminal; exit codes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.testing import FakeAnthropicServer
from tests.support.cli import cli_env, dagwright, one_error_line
from tests.support.llm_script import call, text, turn
from tests.support.terminal import Terminal
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("worker")

NODES = ("fetch", "left", "right", "merge")


def slow_diamond(seconds: float = 1.5) -> PlanBuilder:
    plan = PlanBuilder("watch me")
    fetch = plan.function("fetch", "count", params={"seconds": seconds})
    left = plan.function("left", "count", params={"seconds": seconds}, depends_on=[fetch])
    right = plan.function("right", "count", params={"seconds": seconds}, depends_on=[fetch])
    plan.function("merge", "count", params={"seconds": seconds}, depends_on=[left, right])
    return plan


def node_line(screen: str, node: str) -> str:
    """The table row of ``node`` (indented by its dependency level)."""
    match = re.search(rf"^ *{node} .*$", screen, re.MULTILINE)
    assert match, screen
    return match.group(0)


def shows_running(screen: str) -> bool:
    return bool(re.search(r"^ *\w+ +running +function", screen, re.MULTILINE))


def test_watch_shows_the_run_live_in_a_terminal_and_exits_0_when_it_succeeds(
    client: Client, settings: Settings, tmp_path: Path
) -> None:
    run = client.submit(slow_diamond().build(output="merge"))
    env = cli_env(settings, tmp_path / "data")
    with Terminal("watch", run.run_id, env=env, columns=140, rows=30) as terminal:
        live = wait_until(lambda: terminal.seen(shows_running), timeout=60, what="a running node")
        # Seen live, not afterwards: watch draws "running" only from a reading of a running
        # run. (Asking the run's status here raced its end on a loaded machine.)
        assert f"run {run.run_id} running" in live
        assert "done · " in live and "tokens" in live
        assert terminal.wait(timeout=60) == 0  # exits by itself once the run has ended
        final = terminal.text()
    assert client.counts(run.run_id)[0] == RunStatus.SUCCEEDED
    assert f"run {run.run_id} succeeded" in final
    assert "4/4 done · 0 running · 0 failed" in final
    for node in NODES:
        assert re.search(rf"{node} +succeeded +function +1 +\d+\.\ds", node_line(final, node))
    # Dependency order, each level indented under the one before; "needs" names the deps.
    lines = final.splitlines()
    assert [lines.index(node_line(final, node)) for node in NODES] == sorted(
        lines.index(node_line(final, node)) for node in NODES
    )
    assert node_line(final, "left").startswith("  left")
    assert node_line(final, "merge").startswith("    merge")
    assert node_line(final, "merge").rstrip().endswith("left, right")
    assert final.count(f"run {run.run_id}") == 1  # the live view left nothing behind


def test_a_goal_shows_its_planned_nodes_as_they_appear_with_their_tokens(
    client: Client, settings: Settings, tmp_path: Path, fake_llm: FakeAnthropicServer
) -> None:
    nodes = [
        {"id": "pros", "type": "researcher", "instruction": "List the pros."},
        {"id": "verdict", "type": "writer", "instruction": "Decide.", "depends_on": ["pros"]},
    ]
    fake_llm.add(
        turn("You are the planner", 1, call("submit_plan", goal="g", nodes=nodes, output="verdict"),
             tokens=(500, 80)),
        turn("You are the researcher", 1, text("fast"), tokens=(300, 40), delay_s=2),
        turn("You are the writer", 1, text("use it"), tokens=(200, 30)),
    )  # fmt: skip
    run = client.submit(goal="Should we use Redis streams?")
    env = cli_env(settings, tmp_path / "data")
    with Terminal("watch", run.run_id, env=env) as terminal:
        wait_until(
            lambda: terminal.seen(lambda screen: re.search(r"pros +running +researcher", screen)),
            timeout=60,
            what="the planned node running",
        )
        assert terminal.wait(timeout=60) == 0
        final = terminal.text()
    # The scripted 1,150 tokens, and the prompt cache's writes (the planner may take
    # another turn, so its prefix is marked): the run's total, as status counts it.
    total = client.status(run.run_id).usage.total_tokens
    assert total >= 1150 and "3/3 done" in final and f"{total:,} tokens" in final
    assert re.search(r"_plan +succeeded +planner +1 .* 500 +80 +\$", final)
    assert re.search(r"pros +succeeded +researcher +1 .* 300 +40 +\$", node_line(final, "pros"))
    assert node_line(final, "verdict").startswith("  verdict")  # planned, after pros
    assert node_line(final, "verdict").rstrip().endswith("pros")


def test_ctrl_c_stops_watching_and_the_run_goes_on(
    client: Client, settings: Settings, tmp_path: Path
) -> None:
    run = client.submit(slow_diamond(seconds=2).build(output="merge"))
    env = cli_env(settings, tmp_path / "data")
    with Terminal("watch", run.run_id, env=env) as terminal:
        wait_until(lambda: terminal.seen(shows_running), timeout=60, what="a running node")
        terminal.interrupt()
        assert terminal.wait(timeout=30) == 130
        assert f"stopped watching; the run goes on (dagwright watch {run.run_id})" in (
            terminal.text()
        )
    assert client.counts(run.run_id)[0] == RunStatus.RUNNING
    assert run.wait(timeout=60).status == RunStatus.SUCCEEDED


@pytest.mark.subprocess
def test_without_a_terminal_only_the_final_table_is_printed_and_a_failed_run_exits_1(
    client: Client, settings: Settings, tmp_path: Path
) -> None:
    plan = PlanBuilder("fails")
    first = plan.function("first", "count", params={"seconds": 1})
    plan.function("broken", "flaky", params={"permanent": True}, depends_on=[first])
    run = client.submit(plan.build(output="broken"))
    result = dagwright("watch", run.run_id, env=cli_env(settings, tmp_path / "data"), timeout=90)
    assert result.returncode == 1, result.stderr
    assert "\x1b[" not in result.stdout  # no live redraws, no colours in a pipe
    assert result.stdout.count(f"run {run.run_id}") == 1
    assert f"run {run.run_id} failed" in result.stdout
    assert re.search(r"broken +failed +function +1 ", result.stdout)
    assert re.search(r"first +succeeded +function +1 ", result.stdout)


@pytest.mark.subprocess
def test_watching_a_finished_run_prints_it_at_once(
    client: Client, settings: Settings, tmp_path: Path
) -> None:
    run = client.submit(slow_diamond(seconds=0).build(output="merge"))
    assert run.wait(timeout=60).status == RunStatus.SUCCEEDED
    result = dagwright("watch", run.run_id, env=cli_env(settings, tmp_path / "data"))
    assert result.returncode == 0, result.stderr
    assert "4/4 done" in result.stdout and result.stdout.count("succeeded") == 5


@pytest.mark.subprocess
def test_an_unknown_run_exits_2_with_one_line(
    client: Client, settings: Settings, tmp_path: Path
) -> None:
    result = dagwright("watch", "NOSUCHRUN", env=cli_env(settings, tmp_path / "data"))
    assert result.returncode == 2
    assert "NOSUCHRUN" in one_error_line(result)
    assert result.stdout == ""
