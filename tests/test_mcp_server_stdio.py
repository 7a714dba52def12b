"""``dagwright mcp``, driven over stdio by the real ``mcp`` client SDK, against real
workers: submit a plan and a goal, follow to the result, approve, cancel, replay."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis

from dagwright.settings import Settings
from dagwright.testing import FakeAnthropicServer
from tests.support.cli import cli_env, dagwright
from tests.support.functions import fixed_key
from tests.support.llm_script import planned
from tests.support.mcp_sessions import GATED, HELD, ToolFailed, run, stdio_session

pytestmark = pytest.mark.usefixtures("worker")

CONCAT: dict[str, Any] = {
    "goal": "Join two words",
    "output": "joined",
    "nodes": [
        {"id": "joined", "type": "function", "function": "concat", "params": {"parts": ["a", "b"]}}
    ],
}
BROKEN: dict[str, Any] = {
    "output": "f",
    "nodes": [{"id": "f", "type": "function", "function": "broken_until_fixed"}],
}


def ended(run: dict[str, Any]) -> bool:
    return run["status"] in ("succeeded", "failed", "cancelled")


def test_a_plan_and_a_goal_are_submitted_followed_and_read_over_stdio(
    settings: Settings, redis_client: redis.Redis, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        planned(
            {"id": "words", "type": "function", "function": "concat", "params": {"parts": ["x"]}},
            output="words",
        )
    )

    async def session() -> None:
        async with stdio_session(settings) as mcp:
            submitted = await mcp.call("submit_run", plan=CONCAT)
            assert submitted["status"] in ("running", "succeeded")
            followed = await mcp.call("follow_run", run_id=submitted["run_id"], wait_s=30)
            assert followed["status"] == "succeeded"
            assert mcp.progress and mcp.progress[-1][:2] == (1, 1)  # nodes done of all
            answer = await mcp.call("get_result", run_id=submitted["run_id"])
            assert answer == {"run_id": submitted["run_id"], "result": "a b"}
            planned_run = await mcp.call("submit_run", goal="Say x")
            followed = await mcp.call("follow_run", run_id=planned_run["run_id"], wait_s=30)
            assert followed["status"] == "succeeded" and followed["result"] == "x"
            listed = await mcp.call("list_runs")
            assert {run["run_id"] for run in listed["runs"]} == {
                submitted["run_id"],
                planned_run["run_id"],
            }

    run(session)


def test_a_waiting_node_is_approved_and_a_run_cancelled_with_the_tools(
    settings: Settings, redis_client: redis.Redis
) -> None:
    async def session() -> None:
        async with stdio_session(settings) as mcp:
            gated = (await mcp.call("submit_run", plan=GATED))["run_id"]
            waiting = await mcp.call("follow_run", run_id=gated, wait_s=30)
            assert waiting["nodes"]["deploy"]["status"] == "waiting_approval"
            [approval] = await mcp.call("list_approvals", run_id=gated)
            assert approval["node"] == "deploy" and approval["args"]["params"]
            edited = {"params": {"parts": ["release", "v2"]}}
            decided = await mcp.call(
                "decide_approval", run_id=gated, node_id="deploy", decision="approve", args=edited
            )
            assert decided["status"] == "approved" and decided["decision"]["by"].startswith("local")
            done = await mcp.call("follow_run", run_id=gated, wait_s=30)
            assert done["status"] == "succeeded" and done["result"] == "release v2"
            held = (await mcp.call("submit_run", plan=HELD))["run_id"]
            cancelled = await mcp.call("cancel_run", run_id=held, reason="changed my mind")
            assert cancelled["status"] in ("cancelled", "running")
            final = await mcp.call("follow_run", run_id=held, wait_s=30)
            assert final["status"] == "cancelled" and final["reason"] == "changed my mind"
            with pytest.raises(ToolFailed, match="cancelled"):
                await mcp.call("get_result", run_id=held)

    run(session)


def test_a_dead_letter_is_listed_and_replayed_over_stdio(
    settings: Settings, redis_client: redis.Redis
) -> None:
    async def session() -> None:
        async with stdio_session(settings) as mcp:
            failed = (await mcp.call("submit_run", plan=BROKEN))["run_id"]
            assert (await mcp.call("follow_run", run_id=failed, wait_s=30))["status"] == "failed"
            [letter] = await mcp.call("list_dead_letters", run_id=failed)
            assert letter["node_id"] == "f" and "traceback" not in letter
            redis_client.set(fixed_key(failed), 1)  # the cause, fixed
            replayed = await mcp.call("replay_dead_letter", entry_id=letter["id"])
            assert replayed["replayed"] is True
            again = await mcp.call("follow_run", run_id=failed, wait_s=30)
            assert again["status"] == "succeeded"
            with pytest.raises(ToolFailed, match="replayed"):
                await mcp.call("replay_dead_letter", entry_id=letter["id"])

    run(session)


def test_errors_are_the_clis_one_line_without_a_traceback(
    settings: Settings, redis_client: redis.Redis, tmp_path: Path
) -> None:
    async def session() -> None:
        async with stdio_session(settings) as mcp:
            with pytest.raises(ToolFailed) as unknown:
                await mcp.call("get_run", run_id="nope")
            cli = dagwright("status", "nope", env=cli_env(settings, tmp_path))
            assert cli.stderr.strip().removeprefix("error: ") in str(unknown.value)
            assert "Traceback" not in str(unknown.value)
            with pytest.raises(ToolFailed, match="exactly one of plan, plan_file or goal"):
                await mcp.call("submit_run", plan=CONCAT, goal="both")
            with pytest.raises(ToolFailed, match="DAGWRIGHT_MCP_PLAN_DIR"):
                await mcp.call("submit_run", plan_file="weekly.yaml")
            assert await mcp.call("list_plan_files") == []

    run(session)


def test_plan_files_are_submitted_by_name_from_the_configured_directory_only(
    settings: Settings, redis_client: redis.Redis, tmp_path: Path
) -> None:
    plans = tmp_path / "plans"
    plans.mkdir()
    (plans / "join.yaml").write_text(
        "output: j\nnodes:\n"
        "  - {id: j, type: function, function: concat, params: {parts: [p, q]}}\n"
    )
    (tmp_path / "secret.yaml").write_text("nodes: []\n")
    (plans / "outside.yaml").symlink_to(tmp_path / "secret.yaml")

    async def session() -> None:
        async with stdio_session(settings, DAGWRIGHT_MCP_PLAN_DIR=str(plans)) as mcp:
            assert await mcp.call("list_plan_files") == ["join.yaml"]
            submitted = await mcp.call("submit_run", plan_file="join.yaml")
            followed = await mcp.call("follow_run", run_id=submitted["run_id"], wait_s=30)
            assert followed["result"] == "p q"
            assert json.loads(await mcp.read("dagwright://plans")) == ["join.yaml"]
            assert "concat" in await mcp.read("dagwright://plans/join.yaml")
            with pytest.raises(ToolFailed, match="plan file"):
                await mcp.read("dagwright://plans/outside.yaml")
            for name in ("../secret.yaml", "outside.yaml", "/etc/passwd", "join"):
                with pytest.raises(ToolFailed, match="plan file"):
                    await mcp.call("submit_run", plan_file=name)

    run(session)


def test_without_the_mcp_extra_dagwright_mcp_says_which_extra_in_one_line(
    settings: Settings, tmp_path: Path
) -> None:
    hide_mcp = "import sys; sys.modules['mcp'] = None; sys.argv = ['dagwright', 'mcp']; "
    without = subprocess.run(
        [sys.executable, "-c", hide_mcp + "from dagwright.cli import main; main()"],
        env=cli_env(settings, tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert without.returncode == 2
    assert without.stderr.strip().splitlines() == [
        "error: dagwright mcp needs the 'mcp' package, which is not installed: "
        "pip install 'dagwright[mcp]'"
    ]
    assert without.stdout == ""
