"""Input estimates before a call count everything sent: system prompt, tool definitions and
messages; the static prefix by the API's count_tokens where it answers (once per prefix),
by characters where it does not (the fake API has no count_tokens: the fallback)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dagwright.errors import LLMUnavailableError
from dagwright.llm.anthropic import AnthropicLLM
from dagwright.llm.input_tokens import (
    PLACEHOLDER_MESSAGES,
    InputTokenEstimator,
    rough_messages_tokens,
    rough_request_tokens,
)
from dagwright.llm.protocol import LLMRequest, rough_tokens
from dagwright.models import Node
from dagwright.planning.planner import PlanRequest, run_planner
from dagwright.settings import Settings
from dagwright.testing import FakeAnthropicServer
from dagwright.testing.scripted import ScriptedLLM, text
from dagwright.workers import builtin_registry
from dagwright.workers.budgets import next_call_input_tokens
from tests.support.agents import MemoryServices, agent_context

TOOL = {
    "name": "lookup",
    "description": "Look a word up. " * 50,
    "input_schema": {"type": "object", "properties": {"word": {"type": "string"}}},
}


def request(*messages: dict[str, Any], system: str = "You help.") -> LLMRequest:
    return LLMRequest(
        model="claude-sonnet-5-5",
        system=system,
        messages=list(messages) or [{"role": "user", "content": "Hi there."}],
        tools=[TOOL],
    )


class CountingCounter:
    """A count_tokens endpoint that answers ``prefix`` for any request, or fails."""

    def __init__(self, prefix: int = 0, fails: bool = False) -> None:
        self.prefix, self.fails, self.asked = prefix, fails, 0

    def count_input_tokens(self, request: LLMRequest) -> int:
        self.asked += 1
        if self.fails:
            raise LLMUnavailableError("count_tokens: 404")
        return self.prefix


def test_the_planners_first_call_is_estimated_with_its_tools(tmp_path: Path) -> None:
    llm = ScriptedLLM([text("no plan")])  # then nothing: the loop stops, the call is logged
    services = MemoryServices(llm, tmp_path)
    ctx = agent_context(services, settings=Settings())
    asked = PlanRequest(goal="Compare two things.", max_nodes=10, max_depth=4)
    node = Node(id="_plan", type="planner", params=asked.model_dump())
    with pytest.raises(AssertionError, match="no answer left"):
        run_planner(ctx, node, builtin_registry())
    first = llm.requests[0]
    tools = rough_tokens(json.dumps(first.tools))
    assert tools > 500  # read_input and submit_plan: the plan's whole schema
    estimate = services.reservations[0].input_tokens
    assert estimate == rough_request_tokens(first)
    # each part rounded down on its own, as the estimate rounds them
    without_tools = rough_tokens(first.system) + rough_tokens(json.dumps(first.messages))
    assert estimate >= without_tools + tools


def test_a_later_call_is_estimated_no_lower_than_the_whole_request() -> None:
    answer = {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}
    asked = request(
        {"role": "user", "content": "Hi."}, answer, {"role": "user", "content": "More."}
    )
    whole = rough_request_tokens(asked)
    # The API reported fewer tokens than the request holds (a proxy, a fake): whole wins.
    assert next_call_input_tokens(asked, whole, last_call_tokens=10) == whole
    # It reported more (a tokenizer denser than 4 characters a token): the report wins.
    added = rough_tokens(json.dumps(asked.messages[2:]))
    assert next_call_input_tokens(asked, whole, last_call_tokens=5000) == 5000 + added


def test_the_static_prefix_is_counted_once_by_the_api() -> None:
    counter = CountingCounter(prefix=1234)
    estimator = InputTokenEstimator(counter)
    first = request({"role": "user", "content": "Hi there."})
    later = request({"role": "user", "content": "Something longer " * 40})
    assert estimator.estimate(first) == 1234 + rough_tokens(json.dumps(first.messages))
    assert estimator.estimate(later) == 1234 + rough_tokens(json.dumps(later.messages))
    assert counter.asked == 1
    estimator.estimate(request(system="Another prompt."))  # another prefix: counted too
    assert counter.asked == 2


def test_without_count_tokens_the_whole_request_is_estimated_from_characters() -> None:
    now = [0.0]
    counter = CountingCounter(fails=True)
    estimator = InputTokenEstimator(counter, clock=lambda: now[0])
    asked = request()
    assert estimator.estimate(asked) == rough_request_tokens(asked)
    assert estimator.estimate(asked) == rough_request_tokens(asked)
    assert counter.asked == 1  # not asked again at every call
    now[0] = 10_000.0
    estimator.estimate(asked)
    assert counter.asked == 2  # but again, later
    assert InputTokenEstimator(None).estimate(asked) == rough_request_tokens(asked)


def test_the_prefix_is_counted_by_the_api_once_and_the_messages_estimated(
    settings: Settings, fake_llm: FakeAnthropicServer
) -> None:
    llm = AnthropicLLM(settings.llm)
    estimator = InputTokenEstimator(llm)
    asked = request()
    prefix_only = asked.model_copy(update={"messages": PLACEHOLDER_MESSAGES})
    counted = llm.count_input_tokens(prefix_only)
    assert counted >= rough_tokens(asked.system + json.dumps(asked.tools))
    assert estimator.estimate(asked) == counted + rough_messages_tokens(asked)
    assert estimator.estimate(asked) == counted + rough_messages_tokens(asked)
    assert len(fake_llm.token_counts) == 2  # this test's own, then the estimator's: once
    assert fake_llm.requests == []  # counting is no Messages call


def test_count_tokens_is_asked_with_system_tools_and_messages(settings: Settings) -> None:
    import anthropic
    import httpx2 as httpx

    seen: list[httpx.Request] = []

    def answer(sent: httpx.Request) -> httpx.Response:
        seen.append(sent)
        return httpx.Response(200, json={"input_tokens": 42})

    llm = AnthropicLLM(settings.llm)
    llm._client = anthropic.Anthropic(
        api_key="k",
        base_url="http://api.test",
        http_client=httpx.Client(transport=httpx.MockTransport(answer)),
    )
    assert llm.count_input_tokens(request()) == 42
    [sent] = seen
    body = json.loads(sent.content)
    assert sent.url.path == "/v1/messages/count_tokens"
    assert body["system"] == "You help." and body["tools"] == [TOOL] and body["messages"]
