"""LLM agents end to end: the real anthropic SDK against the fake Messages API, a real
Celery worker and a real Valkey."""

from __future__ import annotations

import pytest
import redis

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.llm.pricing import DEFAULT_MODEL_PRICES
from dagwright.testing import FakeAnthropicServer
from dagwright.testing.fake_anthropic_script import text_of
from tests.support.llm_script import RESEARCHER, call, text, turn
from tests.support.untrusted import without_tokens

pytestmark = pytest.mark.usefixtures("worker")

WRITER = "You are the writer"


def research_then_write() -> PlanBuilder:
    plan = PlanBuilder("Write about Redis streams")
    brief = plan.function("brief", "concat", params={"parts": ["Topic: Redis streams"]})
    research = plan.agent(
        "research", "researcher", "Collect facts on the topic.", depends_on=[brief]
    )
    plan.agent("write", "writer", "Write one paragraph from the facts.", depends_on=[research])
    return plan


def priced(input_tokens: int, output_tokens: int) -> float:
    price = DEFAULT_MODEL_PRICES["claude-sonnet-5-5"]
    return (input_tokens * price.input + output_tokens * price.output) / 1_000_000


def test_a_researcher_then_writer_plan_runs_with_tool_calls(
    client: Client, fake_llm: FakeAnthropicServer, redis_client: redis.Redis
) -> None:
    fake_llm.add(
        turn(
            RESEARCHER,
            1,
            text("Reading the brief."),
            call("read_input", node="brief"),
            tokens=(300, 40),
        ),
        turn(
            RESEARCHER,
            3,
            call("workspace_write", path="notes.md", content="Streams are logs."),
            tokens=(400, 50),
        ),
        turn(RESEARCHER, 5, text("Redis streams are append-only logs."), tokens=(500, 60)),
        turn(WRITER, 1, call("workspace_read", path="notes.md"), tokens=(200, 30)),
        turn(
            WRITER, 3, text("Redis streams are append-only logs, read by groups."), tokens=(250, 70)
        ),
    )
    run = client.submit(research_then_write().build())
    state = run.wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, state.nodes
    assert state.result == "Redis streams are append-only logs, read by groups."

    bodies = [request.body for request in fake_llm.requests]
    assert len(bodies) == 5 and all(b["model"] == "claude-sonnet-5-5" for b in bodies)
    # the researcher read its input through the tool; the writer got the research as data
    assert "Topic: Redis streams" in str(bodies[1]["messages"][-1]["content"])
    writer_prompt = without_tokens(text_of(bodies[3]["messages"][0]["content"]))
    assert (
        '<untrusted_input_T node="research">\nRedis streams are append-only logs.\n'
        "</untrusted_input_T>" in writer_prompt
    )
    assert "Streams are logs." in str(
        bodies[4]["messages"][-1]["content"]
    )  # read back from the workspace

    research, write = state.nodes["research"].usage, state.nodes["write"].usage
    assert (research.input_tokens, research.output_tokens, research.llm_calls) == (1200, 150, 3)
    assert research.cost_usd == pytest.approx(priced(1200, 150))
    assert (write.input_tokens, write.output_tokens, write.llm_calls) == (450, 100, 2)
    assert write.cost_usd == pytest.approx(priced(450, 100))
    assert state.usage.input_tokens == 1650 and state.usage.output_tokens == 250
    assert state.usage.llm_calls == 5
    assert state.usage.cost_usd == pytest.approx(research.cost_usd + write.cost_usd)

    audit = redis_client.xrange(client.runtime.keys.run_key(run.run_id, "audit"))
    assert [(e["node"], e["tool"], e["action"]) for _, e in audit] == [
        ("research", "read_input", "allow"),
        ("research", "workspace_write", "allow"),
        ("write", "workspace_read", "allow"),
    ]
    calls = [e for e in run.events(follow=False) if e.kind == "llm.call"]
    assert len(calls) == 5 and calls[0].data["model"] == "claude-sonnet-5-5"


def test_a_429_529_burst_is_retried_within_one_attempt(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        {"status": 429, "headers": {"retry-after": "0"}},
        {"status": 529},
        {"status": 500},
        turn(RESEARCHER, 1, text("Found it.")),
    )
    plan = PlanBuilder()
    plan.agent("research", "researcher", "Find it.")
    state = client.submit(plan.build()).wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED and state.result == "Found it."
    assert [r.status for r in fake_llm.requests] == [429, 529, 500, 200]
    assert state.nodes["research"].attempts == 1  # the LLM layer retried, not the node
    assert state.usage.llm_calls == 1


@pytest.mark.parametrize("malformed", ["json", "schema"])
def test_a_malformed_response_fails_the_node_permanently(
    client: Client, fake_llm: FakeAnthropicServer, malformed: str
) -> None:
    fake_llm.add({"malformed": malformed, "times": -1})
    plan = PlanBuilder()
    plan.agent("research", "researcher", "Find it.")
    state = client.submit(plan.build()).wait(timeout=60)
    node = state.nodes["research"]
    assert state.status == RunStatus.FAILED and node.attempts == 1
    assert node.error is not None and node.error.error_class == "LLMResponseError"
    assert len(fake_llm.requests) == 1


def test_an_exhausted_api_is_retried_at_node_level(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add({"status": 529, "times": 4}, turn(RESEARCHER, 1, text("Back.")))
    plan = PlanBuilder()
    plan.agent("research", "researcher", "Find it.", retry={"max_attempts": 2, "backoff_s": 0.1})
    state = client.submit(plan.build()).wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED
    assert state.nodes["research"].attempts == 2  # 4 LLM attempts failed: LLMUnavailableError
    assert [r.status for r in fake_llm.requests] == [529, 529, 529, 529, 200]


def test_a_call_of_a_tool_the_type_is_not_offered_is_answered_and_audited(
    client: Client, fake_llm: FakeAnthropicServer, redis_client: redis.Redis
) -> None:
    fake_llm.add(
        turn("You are the reviewer", 1, call("workspace_write", path="verdict.md", content="ok")),
        turn(
            "You are the reviewer",
            3,
            call("final_answer", approved=True, summary="Fine.", issues=[]),
        ),
    )
    plan = PlanBuilder()
    plan.agent("review", "reviewer", "Review the work.")
    state = client.submit(plan.build()).wait(timeout=60)
    assert state.result == {"approved": True, "summary": "Fine.", "issues": []}
    refusal = fake_llm.requests[1].body["messages"][-1]["content"][0]
    # Not the policy's business: a name the model got wrong, with the names it may use.
    assert refusal["is_error"] and refusal["content"] == (
        "no such tool: workspace_write; the tools are: read_input, workspace_read, workspace_list"
    )
    audit = client.audit(state.run_id)
    assert [(e.node, e.tool, e.action, e.rule) for e in audit] == [
        ("review", "workspace_write", "refused", "default")
    ]
    assert audit[0].args == '{"content": "ok", "path": "verdict.md"}'
    assert audit[0].reason.startswith("no such tool: workspace_write; the tools are: ")
    assert client.runtime.client.hlen(client.runtime.keys.run_key(state.run_id, "workspace")) == 0
