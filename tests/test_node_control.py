"""Per-node control of agent nodes: ``output_schema`` (the answer checked, re-asked on a
mismatch, then failed for good), ``model``, ``max_tokens`` and a subset of the type's
``tools``, checked as plan problems and seen in what real workers send to the strict
fake Messages API."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.errors import UnpricedModelError
from dagwright.models import Node
from dagwright.testing import FakeAnthropicServer
from dagwright.workers import builtin_registry
from tests.support.llm_script import RESEARCHER, UNPRICED_MODEL, call, text, turn

WRITER = "You are the writer"
BOOK = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
    "required": ["title", "year"],
}


def problems(**fields: Any) -> list[str]:
    node = Node.model_validate({"id": "n", "instruction": "Do it.", **fields})
    return builtin_registry().node_problems(node)


def test_per_node_fields_are_checked_as_plan_problems() -> None:
    assert problems(type="writer", output_schema=BOOK, model="claude-haiku-4-5") == []
    assert problems(type="writer", output_schema={"type": "array"}) == [
        "`output_schema` must describe a JSON object (`type: object`)"
    ]
    [bad_schema] = problems(type="writer", output_schema={"type": "object", "required": "x"})
    assert bad_schema.startswith("output_schema.required: not a valid JSON Schema: 'x' is not")
    [unknown] = problems(type="writer", model="gpt-4o")
    assert "`model: gpt-4o` is not a Claude model id dagwright knows" in unknown
    assert problems(type="writer", model="claude-haiku-4-5", max_tokens=64_000) == []
    assert problems(type="writer", model="claude-haiku-4-5", max_tokens=64_001) == [
        "`max_tokens: 64001` is above the 64000 that claude-haiku-4-5 can write"
    ]
    [foreign] = problems(type="writer", tools=["read_input", "run_python"])
    assert foreign.startswith("`tools` may only narrow the writer's tools (read_input, ")
    assert foreign.endswith("not theirs: run_python")
    assert problems(type="function", function="concat", model="claude-haiku-4-5", tools=[]) == [
        "`model:` is for LLM calls, which a function node does not make",
        "`tools:` is for LLM calls, which a function node does not make",
    ]


@pytest.mark.usefixtures("worker")
def test_an_answer_that_mismatches_the_output_schema_is_asked_again(
    client: Client, fake_llm: FakeAnthropicServer, redis_client: redis.Redis
) -> None:
    fake_llm.add(
        turn(WRITER, 1, call("final_answer", title="Dune", year="1965")),
        turn(WRITER, 3, text("Fixing the year."), call("final_answer", title="Dune", year=1965)),
    )
    plan = PlanBuilder("A book")
    plan.agent("book", "writer", "Name a book.", output_schema=BOOK)
    state = client.submit(plan.build()).wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, state.nodes
    assert state.result == {"title": "Dune", "year": 1965}

    first, second = (request.body for request in fake_llm.requests)
    [answer_tool] = [tool for tool in first["tools"] if tool["name"] == "final_answer"]
    assert answer_tool["input_schema"] == BOOK
    [rejected] = second["messages"][-1]["content"]
    assert rejected["is_error"] is True
    assert "at input.year: '1965' is not of type 'integer'" in rejected["content"]


@pytest.mark.usefixtures("worker")
def test_an_answer_that_keeps_mismatching_fails_the_node_for_good(
    client: Client, fake_llm: FakeAnthropicServer, redis_client: redis.Redis
) -> None:
    fake_llm.add(
        *(turn(WRITER, n, call("final_answer", title="Dune")) for n in (1, 3, 5)),
    )
    plan = PlanBuilder("A book")
    plan.agent("book", "writer", "Name a book.", output_schema=BOOK)
    state = client.submit(plan.build()).wait(timeout=60)
    assert state.status == RunStatus.FAILED
    error = state.nodes["book"].error
    assert error is not None and error.error_class == "AgentToolErrorsError"
    assert "'year' is a required property" in error.message
    assert len(fake_llm.requests) == 3  # bounded by the type's max_tool_errors, no retry


@pytest.mark.usefixtures("worker")
def test_a_node_s_model_max_tokens_and_tools_reach_the_api(
    client: Client, fake_llm: FakeAnthropicServer, redis_client: redis.Redis
) -> None:
    for topic in ("Alpha", "Beta"):
        fake_llm.add(
            {
                "match": {"system_contains": RESEARCHER, "last_user_contains": topic},
                "reply": {"content": [text(f"{topic} done.")]},
            }
        )
    plan = PlanBuilder("Two topics")
    plan.agent(
        "narrow",
        "researcher",
        "Research Alpha.",
        model="claude-haiku-4-5",
        max_tokens=2000,
        tools=["read_input"],
    )
    plan.agent("plain", "researcher", "Research Beta.")
    state = client.submit(plan.build(output=["narrow", "plain"])).wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, state.nodes

    by_topic = {
        "Alpha" if "Alpha" in str(r.body["messages"]) else "Beta": r.body for r in fake_llm.requests
    }
    narrow, plain = by_topic["Alpha"], by_topic["Beta"]
    assert (narrow["model"], narrow["max_tokens"]) == ("claude-haiku-4-5", 2000)
    assert [tool["name"] for tool in narrow["tools"]] == ["read_input"]
    assert plain["model"] != "claude-haiku-4-5" and plain["max_tokens"] != 2000
    # acceptance: with no DAGWRIGHT_HTTP_ALLOWED_DOMAINS the researcher is not offered http_get
    plain_tools = [tool["name"] for tool in plain["tools"]]
    assert "read_input" in plain_tools and "http_get" not in plain_tools
    assert "web_search" not in plain_tools  # nor the server tools, off by default


def test_a_usd_budget_checks_a_node_s_own_model(no_worker_settings: Settings) -> None:
    plan = PlanBuilder("find it")
    plan.agent("research", "researcher", "Find it.", model=UNPRICED_MODEL)
    with pytest.raises(UnpricedModelError, match=f"{UNPRICED_MODEL} \\(used by node research\\)"):
        Client(no_worker_settings).submit(plan.build(), budget={"max_cost_usd": 1.0})
