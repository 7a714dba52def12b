"""Human approvals: nodes marked ``approval: required`` and tool calls the policy holds
wait for a person without a worker slot, and go on (or not) as decided."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import redis

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.errors import ApprovalError
from dagwright.models import NodeStatus, Plan
from dagwright.testing import FakeAnthropicServer
from tests.support.cli import cli_env, dagwright, json_out, one_error_line
from tests.support.functions import GATEKEEPER
from tests.support.processes import Workers
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("worker")


def gated_plan(timeout_s: float | None = None) -> Plan:
    """deploy (needs approval) -> announce."""
    return Plan.model_validate(
        {
            "nodes": [
                {
                    "id": "deploy",
                    "type": "function",
                    "function": "concat",
                    "params": {"parts": ["release", "v1"]},
                    "approval": "required",
                    "approval_timeout_s": timeout_s,
                },
                {
                    "id": "announce",
                    "type": "function",
                    "function": "concat",
                    "params": {"parts": ["shipped:"]},
                    "depends_on": ["deploy"],
                },
            ]
        }
    )


def waiting_for(client: Client, run_id: str, node: str = "deploy") -> Any:
    wait_until(
        lambda: any(a.node == node for a in client.approvals.list(run_id)),
        timeout=30,
        what=f"{run_id}/{node} waiting for approval",
    )
    [approval] = [a for a in client.approvals.list(run_id) if a.node == node]
    return approval


@pytest.mark.subprocess
def test_a_node_waits_for_approval_with_its_worker_slot_free_then_runs_as_edited(
    subprocess_settings: Settings, workers: Workers, tmp_path: Path
) -> None:
    workers.start(subprocess_settings, concurrency=1)  # one slot: waiting must not take it
    client = Client(subprocess_settings)
    gated = client.submit(gated_plan())
    approval = waiting_for(client, gated.run_id)
    assert (approval.kind, approval.action) == ("node", "function")
    assert approval.args == {"params": {"parts": ["release", "v1"]}}

    solo = PlanBuilder()
    solo.function("solo", "concat", params={"parts": ["x"]})
    other = client.submit(solo.build())
    assert other.wait(timeout=30).status == RunStatus.SUCCEEDED  # ran while deploy waits
    state = gated.status()
    assert state.status == RunStatus.RUNNING
    assert state.nodes["deploy"].status == NodeStatus.WAITING_APPROVAL
    assert state.counts.waiting_approval == 1
    assert state.nodes["announce"].status == NodeStatus.PENDING

    env = cli_env(subprocess_settings, tmp_path / "cli")
    listed = json_out(dagwright("approvals", "list", "--json", env=env))
    assert [(a["run_id"], a["node"], a["status"]) for a in listed] == [
        (gated.run_id, "deploy", "pending")
    ]
    result = dagwright(
        "approve",
        gated.run_id,
        "deploy",
        "-m",
        "ship the fixed build",
        "--by",
        "alice",
        "--args",
        '{"params": {"parts": ["release", "v2"]}}',
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith(
        f"approved the start of function node deploy of run {gated.run_id}: the node is "
        "queued again, to run\n"
    )

    final = gated.wait(timeout=30)
    assert final.status == RunStatus.SUCCEEDED
    assert final.nodes["deploy"].output == "release v2"
    assert final.nodes["deploy"].attempts == 1  # waiting was not an attempt
    assert final.counts.waiting_approval == 0
    audit = [(e.node, e.action, e.by, e.reason) for e in client.audit(gated.run_id)]
    assert audit == [
        ("deploy", "approval_requested", "", ""),
        ("deploy", "approved", "alice", "ship the fixed build"),
    ]
    assert client.approvals.list() == []


@pytest.mark.subprocess
def test_a_rejected_node_fails_into_the_dlq_and_blocks_its_dependents(
    client: Client, settings: Settings, tmp_path: Path
) -> None:
    run = client.submit(gated_plan())
    waiting_for(client, run.run_id)
    env = cli_env(settings, tmp_path / "cli")
    result = dagwright(
        "reject", run.run_id, "deploy", "-m", "not on a Friday", "--by", "bob", env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == (  # what the decision does, not "queued again"
        f"rejected the start of function node deploy of run {run.run_id}: the node fails, and "
        "the nodes that depend on it are blocked\n"
    )
    state = run.wait(timeout=30)
    assert state.status == RunStatus.FAILED
    error = state.nodes["deploy"].error
    assert error is not None and error.error_class == "ApprovalRejectedError"
    assert error.message == "the start of function node deploy was rejected by bob: not on a Friday"
    assert state.nodes["deploy"].attempts == 1  # not retried: a person said no
    assert state.nodes["announce"].status == NodeStatus.BLOCKED
    [letter] = client.dlq.list(run_id=run.run_id)
    assert letter.classification.value == "policy"


def test_an_approval_nobody_decides_is_rejected_at_its_timeout(client: Client) -> None:
    started = time.monotonic()
    run = client.submit(gated_plan(timeout_s=1.0))
    state = run.wait(timeout=30)
    assert state.status == RunStatus.FAILED
    assert time.monotonic() - started < 10
    error = state.nodes["deploy"].error
    assert error is not None
    assert error.message == (
        "the start of function node deploy was rejected by dagwright: nobody decided within 1s"
    )
    actions = [(e.action, e.by) for e in client.audit(run.run_id)]
    assert actions == [("approval_requested", ""), ("rejected", "dagwright")]


def gatekeeper_script(fake_llm: FakeAnthropicServer, final: str) -> None:
    fake_llm.add(
        {
            "match": {"system_contains": GATEKEEPER, "messages_count": 1},
            "reply": {
                "content": [
                    {"type": "text", "text": "I will save the draft."},
                    {
                        "type": "tool_use",
                        "name": "workspace_write",
                        "input": {"path": "notes.md", "content": "draft"},
                    },
                ]
            },
        },
        {
            "match": {"system_contains": GATEKEEPER, "messages_count": 3},
            "reply": {"content": [{"type": "text", "text": final}]},
        },
    )


def gatekeeper_run(client: Client) -> Any:
    plan = PlanBuilder()
    plan.agent("keep", "gatekeeper", "Save the notes.")
    return client.submit(plan.build())


def test_an_agent_tool_call_waits_for_approval_and_runs_with_edited_arguments(
    client: Client, fake_llm: FakeAnthropicServer, redis_client: redis.Redis
) -> None:
    gatekeeper_script(fake_llm, "Saved.")
    run = gatekeeper_run(client)
    approval = waiting_for(client, run.run_id, "keep")
    assert (approval.kind, approval.action) == ("tool", "workspace_write")
    assert approval.args == {"path": "notes.md", "content": "draft"}
    assert approval.reasoning == "I will save the draft."
    assert len(fake_llm.requests) == 1

    client.approvals.approve(run.run_id, "keep", args={"path": "notes.md", "content": "final"})
    state = run.wait(timeout=30)
    assert state.status == RunStatus.SUCCEEDED and state.result == "Saved."
    workspace = client.runtime.keys.run_key(run.run_id, "workspace")
    assert client.runtime.client.hget(workspace, "notes.md") == "final"
    assert len(fake_llm.requests) == 2  # resumed from its checkpoint: turn 1 not asked again
    tool_result = fake_llm.requests[1].body["messages"][-1]["content"][0]
    assert not tool_result["is_error"]
    actions = [e.action for e in client.audit(run.run_id)]
    assert actions == ["require_approval", "approval_requested", "approved"]


def test_a_rejected_tool_call_is_reported_to_the_agent(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    gatekeeper_script(fake_llm, "Understood, nothing saved.")
    run = gatekeeper_run(client)
    waiting_for(client, run.run_id, "keep")
    client.approvals.reject(run.run_id, "keep", comment="no writes during the freeze", by="carol")
    state = run.wait(timeout=30)
    assert state.status == RunStatus.SUCCEEDED
    tool_result = fake_llm.requests[1].body["messages"][-1]["content"][0]
    assert tool_result["is_error"]
    assert "carol" in tool_result["content"]
    assert "no writes during the freeze" in tool_result["content"]
    workspace = client.runtime.keys.run_key(run.run_id, "workspace")
    assert client.runtime.client.hlen(workspace) == 0


def test_a_cancelled_run_leaves_no_approval_to_decide(client: Client) -> None:
    run = client.submit(gated_plan())
    waiting_for(client, run.run_id)
    state = client.cancel(run.run_id)
    assert state.nodes["deploy"].status == NodeStatus.CANCELLED
    assert state.counts.waiting_approval == 0
    assert client.approvals.list() == []
    with pytest.raises(
        ApprovalError, match="no longer waiting for an approval: the run is cancelled"
    ):
        client.approvals.approve(run.run_id, "deploy")


@pytest.mark.subprocess
def test_deciding_what_does_not_wait_is_one_clear_input_error(
    client: Client, settings: Settings, tmp_path: Path
) -> None:
    run = client.submit(gated_plan())
    waiting_for(client, run.run_id)
    env = cli_env(settings, tmp_path / "cli")

    result = dagwright("approve", run.run_id, "announce", env=env)
    assert result.returncode == 2
    assert "is not waiting for an approval" in one_error_line(result)

    result = dagwright("approve", run.run_id, "deploy", "--args", "{nope", env=env)
    assert result.returncode == 2
    assert "--args is not JSON" in one_error_line(result)

    result = dagwright("approve", run.run_id, "deploy", "--args", '{"retry": 3}', env=env)
    assert result.returncode == 2
    assert "may edit params, instruction, code; not 'retry'" in one_error_line(result)

    assert client.approvals.list(run.run_id)  # still waiting: nothing was decided
    client.cancel(run.run_id)
