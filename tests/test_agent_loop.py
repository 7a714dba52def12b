"""The agent loop with a scripted LLM and in-memory services (no HTTP, no Redis)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from dagwright.errors import (
    AgentMaxTurnsError,
    AgentOutputError,
    AgentToolErrorsError,
    BudgetExceededError,
    ConfigurationError,
    NodeLostError,
    ToolPolicyError,
)
from dagwright.models import Approval, ApprovalDecision, ApprovalStatus
from dagwright.settings import Settings
from dagwright.testing.scripted import (
    ScriptedLLM,
    reply,
    text,
    text_block,
    tool_use,
    tool_use_block,
)
from dagwright.workers import builtin_registry
from dagwright.workers.agent_loop import AgentSpec, run_agent
from dagwright.workers.proposals import ApprovalNeeded
from dagwright.workers.tools.policy import PolicyAction, PolicyRule, ToolPolicy
from tests.support.agents import MemoryServices, agent_context, agent_node

SPEC = AgentSpec(
    name="tester",
    description="test agent",
    system_prompt="You test.",
    tools=("read_input", "workspace_write", "workspace_read"),
    policy=ToolPolicy.allowing("read_input", "workspace_write", "workspace_read"),
    model="claude-test",
)


def run(
    script: list[Any], tmp_path: Path, spec: AgentSpec = SPEC, **ctx: Any
) -> tuple[Any, ScriptedLLM, MemoryServices]:
    llm = ScriptedLLM(script)
    services = MemoryServices(llm, tmp_path)
    output = run_agent(agent_context(services, **ctx), agent_node(), spec, builtin_registry().tools)
    return output, llm, services


def tool_results(request_messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        b
        for m in request_messages
        if m["role"] == "user"
        for b in m["content"]
        if isinstance(m["content"], list)
    ]


def test_tool_calls_then_a_final_answer(tmp_path: Path) -> None:
    output, llm, services = run(
        [tool_use("read_input", {"node": "facts"}), text("The answer is 42.", cost_usd=0.5)],
        tmp_path,
        inputs={"facts": {"answer": 42}},
    )
    assert output == "The answer is 42."
    assert len(llm.requests) == 2
    assert llm.requests[0].tools[0]["name"] == "read_input"
    assert llm.requests[0].model == "claude-test" and llm.requests[0].system == "You test."
    [result] = tool_results(llm.requests[1].messages)
    assert result["is_error"] is False and '"answer": 42' in result["content"]
    # one checkpoint per LLM response, one per tool result
    assert len(services.checkpoints) == 3
    assert services.usage.llm_calls == 2 and services.usage.input_tokens == 20
    assert services.usage.cost_usd == 0.5
    assert [event[0] for event in services.events] == ["llm.call", "llm.call"]
    assert services.audits[0]["tool"] == "read_input" and services.audits[0]["action"] == "allow"


def test_a_resumed_loop_repeats_no_llm_call_and_no_tool_call(tmp_path: Path) -> None:
    script = [
        tool_use("workspace_write", {"path": "a.txt", "content": "one"}),
        tool_use("workspace_write", {"path": "b.txt", "content": "two"}),
        text("done"),
    ]
    first_llm = ScriptedLLM(script[:2])
    crashed = MemoryServices(first_llm, tmp_path, lose_after_writes=3)  # dies at the 4th write
    with pytest.raises(NodeLostError):
        run_agent(agent_context(crashed), agent_node(), SPEC, builtin_registry().tools)
    assert len(first_llm.requests) == 2
    checkpoint = crashed.checkpoints[-1]  # after the 2nd response; its tool call not answered
    assert checkpoint["turn"] == 2 and len(checkpoint["pending"]) == 1

    second_llm = ScriptedLLM(script[2:])
    resumed = MemoryServices(second_llm, tmp_path)
    output = run_agent(
        agent_context(resumed, checkpoint=checkpoint), agent_node(), SPEC, builtin_registry().tools
    )
    assert output == "done"
    assert len(second_llm.requests) == 1  # only the call that had not returned
    assert (tmp_path / "run1" / "b.txt").read_text() == "two"
    assert len(second_llm.requests[0].messages) == 5


def test_max_turns_is_its_own_outcome_and_every_call_is_accounted(tmp_path: Path) -> None:
    spec = dataclasses.replace(SPEC, max_turns=2)
    script = [tool_use("read_input", {"node": "x"}) for _ in range(2)]
    with pytest.raises(AgentMaxTurnsError, match="no final answer after 2 turns"):
        run(script, tmp_path, spec=spec, inputs={"x": 1})


def test_too_many_failing_tool_calls_in_a_row(tmp_path: Path) -> None:
    script = [tool_use("read_input", {"node": "missing"}) for _ in range(3)]
    with pytest.raises(AgentToolErrorsError, match="3 tool calls in a row failed"):
        run(script, tmp_path)


def test_tool_errors_ending_in_a_policy_refusal_are_a_policy_failure(tmp_path: Path) -> None:
    # What must change is the policy, not the model's next try: the DLQ classes it "policy".
    script = [
        tool_use("read_input", {"node": "missing"}),
        tool_use("read_input", {"node": "missing"}),
        tool_use("workspace_write", {"path": "a.md", "content": "x"}),
    ]
    denying = dataclasses.replace(SPEC, policy=ToolPolicy.allowing("read_input"))
    with pytest.raises(ToolPolicyError, match="refused by the tool policy"):
        run(script, tmp_path, spec=denying)


def test_a_tool_that_was_not_offered_is_answered_with_the_tools_there_are(
    tmp_path: Path,
) -> None:
    # A made-up name is the model's mistake, which it can correct: not a policy refusal.
    script = [tool_use("http_get", {"url": "https://example.com"}), text("done")]
    output, llm, services = run(script, tmp_path)
    assert output == "done"
    [result] = tool_results(llm.requests[1].messages)
    assert result["is_error"] is True
    assert result["content"] == (
        "no such tool: http_get; the tools are: read_input, workspace_write, workspace_read"
    )
    assert [(a["tool"], a["action"]) for a in services.audits] == [("http_get", "refused")]


def test_unknown_tool_names_end_as_tool_errors_not_as_a_policy_failure(tmp_path: Path) -> None:
    script = [tool_use("http_get", {"url": "https://example.com"})] * 3
    with pytest.raises(AgentToolErrorsError, match="no such tool: http_get") as raised:
        run(script, tmp_path)
    assert not isinstance(raised.value, ToolPolicyError)


def test_a_successful_tool_call_resets_the_error_streak(tmp_path: Path) -> None:
    script = [
        tool_use("read_input", {"node": "missing"}),
        tool_use("read_input", {"node": "missing"}),
        tool_use("read_input", {"node": "x"}),
        tool_use("read_input", {"node": "missing"}),
        text("ok"),
    ]
    output, _, _ = run(script, tmp_path, inputs={"x": 1})
    assert output == "ok"


def test_the_budget_refuses_the_call_that_would_exceed_it(tmp_path: Path) -> None:
    spec = dataclasses.replace(SPEC, token_budget=5000, max_tokens=1000)
    llm = ScriptedLLM([tool_use("read_input", {"node": "x"}, input_tokens=2000, output_tokens=500)])
    services = MemoryServices(llm, tmp_path)
    ctx = agent_context(services, inputs={"x": 1})
    # the next call reads the 2,500 tokens again and may write 1,000: 6,000 > 5,000
    with pytest.raises(BudgetExceededError, match="node 'agent' budget 5,000 tokens"):
        run_agent(ctx, agent_node(), spec, builtin_registry().tools)
    assert len(llm.requests) == 1
    assert services.usage.total_tokens == 2500  # never above the budget


def test_a_first_call_that_could_pass_the_budget_is_not_made(tmp_path: Path) -> None:
    llm = ScriptedLLM([])
    spec = dataclasses.replace(SPEC, token_budget=500, max_tokens=1000)
    with pytest.raises(BudgetExceededError):
        run_agent(
            agent_context(MemoryServices(llm, tmp_path)),
            agent_node(),
            spec,
            builtin_registry().tools,
        )
    assert llm.requests == []


def test_denied_and_unlisted_tools_are_refused_and_audited(tmp_path: Path) -> None:
    spec = dataclasses.replace(
        SPEC,
        policy=ToolPolicy(
            rules=[
                PolicyRule(
                    tool="workspace_write", action=PolicyAction.ALLOW, when={"path": "notes/*"}
                ),
                PolicyRule(tool="workspace_*", action=PolicyAction.DENY, reason="notes only"),
                PolicyRule(tool="read_input", action=PolicyAction.REQUIRE_APPROVAL),
            ]
        ),
    )
    script = [
        reply(
            tool_use_block("workspace_write", {"path": "notes/a.md", "content": "ok"}),
            tool_use_block("workspace_write", {"path": "secret.md", "content": "no"}),
            tool_use_block("http_get", {"url": "https://example.com"}),
        ),
        text("finished"),
    ]
    lenient = dataclasses.replace(spec, max_tool_errors=5)
    output, llm, services = run(script, tmp_path, spec=lenient, inputs={"x": 1})
    assert output == "finished"
    results = tool_results(llm.requests[1].messages)
    assert [r["is_error"] for r in results] == [False, True, True]
    assert "refused by the tool policy: notes only" in results[1]["content"]
    assert results[2]["content"].startswith("no such tool: http_get; the tools are: ")
    assert [(a["tool"], a["action"], a["rule"]) for a in services.audits] == [
        ("workspace_write", "allow", "0"),
        ("workspace_write", "deny", "1"),
        ("http_get", "refused", "default"),
    ]
    assert (tmp_path / "run1" / "notes" / "a.md").exists()
    assert not (tmp_path / "run1" / "secret.md").exists()


APPROVING = dataclasses.replace(
    SPEC,
    policy=ToolPolicy(
        rules=[PolicyRule(tool="workspace_write", action=PolicyAction.REQUIRE_APPROVAL)]
    ),
)


def decided_approval(status: ApprovalStatus, call_id: str, **decision: Any) -> Approval:
    now = datetime.now(UTC)
    return Approval(
        id="a1",
        run_id="run1",
        node="agent",
        kind="tool",
        action="workspace_write",
        args={"path": "notes.md", "content": "draft"},
        tool_use_id=call_id,
        requested_at=now,
        deadline=now,
        decision=ApprovalDecision(status=status, by="alice", at=now, **decision),
    )


@pytest.mark.parametrize(
    ("status", "written", "result_is_error"),
    [(ApprovalStatus.APPROVED, "edited", False), (ApprovalStatus.REJECTED, None, True)],
)
def test_a_tool_call_needing_approval_stops_the_loop_and_resumes_with_the_decision(
    tmp_path: Path, status: ApprovalStatus, written: str | None, result_is_error: bool
) -> None:
    call = tool_use_block("workspace_write", {"path": "notes.md", "content": "draft"})
    llm = ScriptedLLM([reply(text_block("Saving."), call), text("done")])
    services = MemoryServices(llm, tmp_path)
    with pytest.raises(ApprovalNeeded) as waiting:
        run_agent(agent_context(services), agent_node(), APPROVING, builtin_registry().tools)
    proposal = waiting.value.proposal
    assert (proposal.kind, proposal.action, proposal.reasoning) == (
        "tool",
        "workspace_write",
        "Saving.",
    )
    assert proposal.tool_use_id == call["id"] and len(llm.requests) == 1

    edited = {"path": "notes.md", "content": "edited"} if written else None
    services.approval_given = decided_approval(status, call["id"], comment="why", args=edited)
    resumed = agent_context(services, checkpoint=services.checkpoints[-1])
    assert run_agent(resumed, agent_node(), APPROVING, builtin_registry().tools) == "done"
    assert len(llm.requests) == 2  # the first call was not made again
    [result] = tool_results(llm.requests[1].messages)
    assert result["is_error"] is result_is_error
    note = tmp_path / "run1" / "notes.md"
    assert (note.read_text() if note.exists() else None) == written
    if result_is_error:
        assert "alice" in result["content"] and "why" in result["content"]


def test_workspace_tools_refuse_traversal_and_symlinks(tmp_path: Path) -> None:
    (tmp_path / "run1").mkdir()
    (tmp_path / "secret.txt").write_text("s3cret")
    (tmp_path / "run1" / "out").symlink_to(tmp_path)
    script = [
        reply(
            tool_use_block("workspace_read", {"path": "../secret.txt"}),
            tool_use_block("workspace_read", {"path": "/etc/passwd"}),
            tool_use_block("workspace_read", {"path": "out/secret.txt"}),
        ),
        text("nothing"),
    ]
    _, llm, _ = run(script, tmp_path, spec=dataclasses.replace(SPEC, max_tool_errors=5))
    results = tool_results(llm.requests[1].messages)
    assert all(r["is_error"] for r in results)
    assert "'..' is refused" in results[0]["content"]
    assert "absolute paths are refused" in results[1]["content"]
    assert "symbolic link" in results[2]["content"]
    assert not any("s3cret" in r["content"] for r in results)


class Verdict(BaseModel):
    approved: bool
    issues: list[str]


def test_a_structured_answer_is_checked_against_its_model(tmp_path: Path) -> None:
    spec = dataclasses.replace(SPEC, output_model=Verdict)
    script = [
        tool_use("final_answer", {"approved": "maybe"}),
        tool_use("final_answer", {"approved": True, "issues": ["typo"]}),
    ]
    output, llm, _ = run(script, tmp_path, spec=spec)
    assert output == {"approved": True, "issues": ["typo"]}
    assert llm.requests[0].tools[-1]["name"] == "final_answer"
    [error] = tool_results(llm.requests[1].messages)
    assert error["is_error"] and "rejected: it does not match the schema" in error["content"]


def test_a_truncated_answer_at_the_cap_is_an_error_after_its_cost_is_recorded(
    tmp_path: Path,
) -> None:
    llm = ScriptedLLM([reply(tool_use_block("workspace_list", {}), stop_reason="max_tokens")])
    services = MemoryServices(llm, tmp_path)
    settings = Settings(llm_max_tokens_cap=SPEC.max_tokens)
    with pytest.raises(AgentOutputError, match="cut at max_tokens"):
        run_agent(
            agent_context(services, settings=settings),
            agent_node(),
            SPEC,
            builtin_registry().tools,
        )
    assert services.usage.llm_calls == 1


def test_any_valid_final_answer_of_a_response_ends_the_loop(tmp_path: Path) -> None:
    spec = dataclasses.replace(SPEC, output_model=Verdict)
    script = [
        reply(
            tool_use_block("final_answer", {"approved": "perhaps"}),
            tool_use_block("final_answer", {"approved": False, "issues": []}),
        )
    ]
    output, llm, _ = run(script, tmp_path, spec=spec)
    assert output == {"approved": False, "issues": []} and len(llm.requests) == 1


def test_an_agent_type_cannot_name_a_tool_nobody_registered() -> None:
    from dagwright.workers import WorkerRegistry, add_declared

    spec = dataclasses.replace(SPEC, name="broken", tools=("read_inptu",))
    with pytest.raises(ConfigurationError, match=r"unknown tool\(s\) read_inptu: declare"):
        add_declared(WorkerRegistry(), [spec])
