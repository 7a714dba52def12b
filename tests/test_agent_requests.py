"""What an agent sends to the Messages API, through the real SDK to the fake server:
prompt-cache breakpoints on the system blocks and the conversation's tail where they are
long enough to cache, never an empty message or text block, and the one nudge after an
empty answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import SecretStr

from dagwright.llm.anthropic import AnthropicLLM
from dagwright.llm.prompt_caching import MAX_BREAKPOINTS, breakpoints
from dagwright.llm.protocol import LLMRequest, LLMResponse
from dagwright.settings import Settings
from dagwright.testing import FakeAnthropicServer
from dagwright.workers import builtin_registry
from dagwright.workers.agent_loop import NUDGE, AgentSpec, run_agent
from dagwright.workers.builtin_agents import builtin_agents
from dagwright.workers.context import RunBackground
from tests.support.agents import MemoryServices, agent_context, agent_node
from tests.support.llm_script import RESEARCHER, call, text, turn, write

EPHEMERAL = {"type": "ephemeral"}
# Long enough that the run's system block ends past Sonnet 5.5's 4,096-token minimum.
CONTEXT = "We run three brokers in two regions. " * 600


def researcher_run(fake_llm: FakeAnthropicServer, tmp_path: Path, **settings: Any) -> Any:
    config = Settings(
        anthropic_base_url=fake_llm.base_url, anthropic_api_key=SecretStr("k"), **settings
    )
    services = MemoryServices(AnthropicLLM(config.llm), tmp_path)
    services.background = RunBackground(goal="Weigh Redis streams", context=CONTEXT)
    [spec] = [spec for spec in builtin_agents() if spec.name == "researcher"]
    ctx = agent_context(services, inputs={"brief": "Redis streams"}, settings=config)
    return run_agent(ctx, agent_node("Collect facts."), spec, builtin_registry().tools)


def assert_cache_breakpoints(body: dict[str, Any], ttl: dict[str, str] = EPHEMERAL) -> None:
    assert body["system"][-1]["cache_control"] == ttl  # the run's block: goal and context
    assert "cache_control" not in body["system"][0]  # tools and the type's prompt: too short
    assert "cache_control" not in body["tools"][-1]
    last = body["messages"][-1]["content"]
    assert isinstance(last, list) and last[-1]["cache_control"] == ttl
    assert breakpoints(body) <= MAX_BREAKPOINTS


def assert_nothing_empty(body: dict[str, Any]) -> None:
    for message in body["messages"]:
        assert message["content"], f"empty {message['role']} message"
        if isinstance(message["content"], list):
            texts = [b for b in message["content"] if b.get("type") == "text"]
            assert all(b["text"].strip() for b in texts), message


def test_every_request_of_an_agent_carries_cache_breakpoints(
    fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    fake_llm.add(
        turn(RESEARCHER, 1, text("Reading."), call("read_input", node="brief")),
        turn(RESEARCHER, 3, write("notes.md", "Streams are logs.")),
        turn(RESEARCHER, 5, text("Redis streams are append-only logs.")),
    )
    assert researcher_run(fake_llm, tmp_path) == "Redis streams are append-only logs."
    bodies = [request.body for request in fake_llm.requests]
    assert len(bodies) == 3
    for body in bodies:
        assert_cache_breakpoints(body)
        assert_nothing_empty(body)
    # the previous request's tail is marked too: the prefix it wrote is read back
    assert bodies[2]["messages"][2]["content"][-1]["cache_control"] == EPHEMERAL
    assert "temperature" not in bodies[0]


class CacheUsageLog:
    """The LLM of the tests below: the API's, keeping the cache usage of each answer."""

    def __init__(self, llm: AnthropicLLM) -> None:
        self.llm = llm
        self.calls: list[tuple[int, int]] = []
        """(written, read) tokens of each call."""

    def complete(self, request: LLMRequest) -> LLMResponse:
        response = self.llm.complete(request)
        usage = response.usage
        self.calls.append((usage.cache_creation_input_tokens, usage.cache_read_input_tokens))
        return response


def services_settings(fake_llm: FakeAnthropicServer) -> Settings:
    return Settings(anthropic_base_url=fake_llm.base_url, anthropic_api_key=SecretStr("k"))


def logged_services(fake_llm: FakeAnthropicServer, tmp_path: Path) -> MemoryServices:
    config = services_settings(fake_llm)
    services = MemoryServices(CacheUsageLog(AnthropicLLM(config.llm)), tmp_path)
    services.background = RunBackground(goal="Weigh Redis streams", context=CONTEXT, nonce="n")
    return services


def cache_usage(services: MemoryServices) -> list[tuple[int, int]]:
    llm = services._llm
    assert isinstance(llm, CacheUsageLog)
    return llm.calls


def test_the_nodes_of_a_run_read_each_others_cached_background(
    fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    fake_llm.add(turn(RESEARCHER, 1, text("Found.")), turn(RESEARCHER, 1, text("Checked.")))
    services = logged_services(fake_llm, tmp_path)
    config = services_settings(fake_llm)
    [spec] = [spec for spec in builtin_agents() if spec.name == "researcher"]
    for node_id, task in (("find", "Find facts."), ("check", "Check the facts.")):
        ctx = services.context(inputs={"brief": "Redis"}, settings=config, node_id=node_id)
        run_agent(ctx, agent_node(task), spec, builtin_registry().tools)
    (first_written, first_read), (_, second_read) = cache_usage(services)
    assert first_read == 0 and first_written > len(CONTEXT) // 4
    assert second_read >= len(CONTEXT) // 4  # the second node reads what the first wrote


def test_a_one_turn_node_writes_nothing_to_the_cache(
    fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    """No tools: no second turn reads its prompt back, so nothing is written."""
    fake_llm.add(turn("You answer.", 1, text("Answered.")))
    services = logged_services(fake_llm, tmp_path)
    config = services_settings(fake_llm)
    spec = AgentSpec(name="answerer", description="d", system_prompt="You answer.")
    ctx = agent_context(services, settings=config)
    assert run_agent(ctx, agent_node(), spec, builtin_registry().tools) == "Answered."
    assert cache_usage(services) == [(0, 0)]
    assert breakpoints(fake_llm.requests[0].body) == 0


def test_an_hour_ttl_and_caching_off(fake_llm: FakeAnthropicServer, tmp_path: Path) -> None:
    fake_llm.add(turn(RESEARCHER, 1, text("Done.")), turn(RESEARCHER, 1, text("Done.")))
    researcher_run(fake_llm, tmp_path, llm_prompt_cache_ttl="1h")
    researcher_run(fake_llm, tmp_path, llm_prompt_cache_ttl="off")
    hour, off = (request.body for request in fake_llm.requests)
    assert_cache_breakpoints(hour, {"type": "ephemeral", "ttl": "1h"})
    assert "cache_control" not in str(off) and breakpoints(off) == 0


def test_an_empty_answer_after_tool_results_gets_one_nudge(
    fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    fake_llm.add(
        turn(RESEARCHER, 1, call("read_input", node="brief")),
        turn(RESEARCHER, 3),  # content: [] and end_turn, as the real API sometimes answers
        turn(RESEARCHER, 3, text("Redis streams.")),
    )
    assert researcher_run(fake_llm, tmp_path) == "Redis streams."
    bodies = [request.body for request in fake_llm.requests]
    nudged = bodies[2]["messages"][-1]["content"]
    assert nudged[0]["type"] == "tool_result" and nudged[-1]["text"] == NUDGE
    for body in bodies:
        assert_nothing_empty(body)


def test_a_tool_call_cut_at_max_tokens_is_retried_not_run(
    fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    cut = turn(RESEARCHER, 1, write("cut.md", "half"))
    cut["reply"]["stop_reason"] = "max_tokens"
    fake_llm.add(cut, turn(RESEARCHER, 1, text("Short answer.")))
    assert researcher_run(fake_llm, tmp_path) == "Short answer."
    assert [r.body["max_tokens"] for r in fake_llm.requests] == [16_000, 32_000]
    assert not (tmp_path / "run1" / "cut.md").exists()
