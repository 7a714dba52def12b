"""Research that works out of the box: the API's server-side web search and fetch offered
to the researcher when the settings turn them on (their domain lists passed through), the
server blocks carried back unchanged across a paused turn, their usage and cost
accounted; ``http_get`` offered only where it can fetch; the planner's catalog made from
what each type is really offered. The real SDK against the strict fake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.cli.output import spend
from dagwright.llm.anthropic import AnthropicLLM
from dagwright.llm.pricing import DEFAULT_MODEL_PRICES, priced
from dagwright.models import Usage
from dagwright.planning.planner import RestrictedCatalog
from dagwright.plans.files import load_plan
from dagwright.settings import Settings
from dagwright.testing import FakeAnthropicServer, Script
from dagwright.workers import builtin_registry
from dagwright.workers.agent_loop import run_agent
from dagwright.workers.builtin_agents import builtin_agents
from tests.support.agents import MemoryServices, agent_context, agent_node
from tests.support.llm_script import RESEARCHER, text, turn
from tests.support.processes import Workers

WEB = {
    "web_search": True,
    "web_search_allowed_domains": ["valkey.io"],
    "web_search_max_uses": 4,
    "web_fetch": True,
    "web_fetch_blocked_domains": ["ads.example"],
}
SEARCH_CALL = {"type": "server_tool_use", "name": "web_search", "input": {"query": "license"}}
FOUND = {
    "type": "web_search_tool_result",
    "results": [{"url": "https://valkey.io/", "title": "Valkey"}],
}
READ_CALL = {"type": "tool_use", "name": "read_input", "input": {"node": "brief"}}
CITED = {
    "type": "text",
    "text": "Valkey is BSD-licensed.",
    "citations": [{"url": "https://valkey.io/", "title": "Valkey", "cited_text": "BSD"}],
}


def researcher(
    fake_llm: FakeAnthropicServer, tmp_path: Path, **settings: Any
) -> tuple[Any, MemoryServices]:
    config = Settings(
        anthropic_base_url=fake_llm.base_url, anthropic_api_key=SecretStr("k"), **settings
    )
    services = MemoryServices(AnthropicLLM(config.llm), tmp_path)
    [spec] = [spec for spec in builtin_agents() if spec.name == "researcher"]
    ctx = agent_context(services, inputs={"brief": "Valkey"}, settings=config)
    output = run_agent(ctx, agent_node("Find its license."), spec, builtin_registry().tools)
    return output, services


def tool_names(body: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in body.get("tools", [])]


def test_a_researcher_searches_across_a_paused_turn_and_its_searches_are_paid(
    fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    paused = turn(RESEARCHER, 1, text("Searching."), SEARCH_CALL)
    paused["reply"]["stop_reason"] = "pause_turn"
    fake_llm.add(paused, turn(RESEARCHER, 2, FOUND, CITED))
    output, services = researcher(fake_llm, tmp_path, **WEB)
    assert output == "Valkey is BSD-licensed.\n\nSources:\n- Valkey <https://valkey.io/>"

    first, second = (request.body for request in fake_llm.requests)
    assert tool_names(first) == [
        "read_input",
        "web_search",
        "web_fetch",
        "workspace_read",
        "workspace_write",
        "workspace_list",
    ]  # no http_get: no DAGWRIGHT_HTTP_ALLOWED_DOMAINS
    search, fetch = first["tools"][1], first["tools"][2]
    assert search == {
        "type": "web_search_20250305",
        "name": "web_search",
        "max_uses": 4,
        "allowed_domains": ["valkey.io"],
    }
    assert fetch["type"] == "web_fetch_20250910" and fetch["blocked_domains"] == ["ads.example"]
    assert "allowed_domains" not in fetch and fetch["citations"] == {"enabled": True}
    # the paused turn went back as it came, as the last message: the API goes on from it
    paused = second["messages"][-1]
    assert paused["role"] == "assistant"
    sent_call = {k: v for k, v in paused["content"][1].items() if k != "cache_control"}
    assert sent_call == {**SEARCH_CALL, "id": "srvtoolu_1"}

    usage = services.usage
    assert usage.web_search_requests == 1 and usage.llm_calls == 2
    tokens_only = priced(usage.model_copy(update={"web_search_requests": 0}), price_of_default())
    assert usage.cost_usd == pytest.approx(tokens_only.cost_usd + 0.01)


def price_of_default() -> Any:
    return DEFAULT_MODEL_PRICES[Settings().llm.default_model]


def test_server_tool_blocks_stay_in_the_conversation_and_are_not_client_calls(
    fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    fake_llm.add(
        turn(RESEARCHER, 1, SEARCH_CALL, FOUND, text("Reading it."), *[READ_CALL]),
        turn(RESEARCHER, 3, CITED),
    )
    output, _ = researcher(fake_llm, tmp_path, **WEB)
    assert output.startswith("Valkey is BSD-licensed.")
    second = fake_llm.requests[1].body
    turn_sent = second["messages"][1]["content"]
    assert [block["type"] for block in turn_sent] == [
        "server_tool_use",
        "web_search_tool_result",
        "text",
        "tool_use",
    ]
    # only the client call got a tool_result
    results = second["messages"][2]["content"]
    assert [block["type"] for block in results] == ["tool_result"]


def test_a_citation_without_a_title_goes_back_with_its_null_title(
    fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    untitled = {**CITED, "citations": [{"url": "https://valkey.io/", "cited_text": "BSD"}]}
    fake_llm.add(
        turn(RESEARCHER, 1, SEARCH_CALL, FOUND, untitled, READ_CALL),
        turn(RESEARCHER, 3, text("Done.")),
    )
    output, _ = researcher(fake_llm, tmp_path, **WEB)
    assert output == "Done."
    sent = fake_llm.requests[1].body["messages"][1]["content"][2]["citations"][0]
    assert sent["title"] is None  # the API requires the key (nullable): a 400 without it


def test_no_web_tool_is_offered_by_default_and_http_get_only_with_domains(
    fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    fake_llm.add(turn(RESEARCHER, 1, text("From the inputs.")), turn(RESEARCHER, 1, text("Ok.")))
    researcher(fake_llm, tmp_path)
    researcher(fake_llm, tmp_path, http_allowed_domains=["example.com"])
    bare, with_domains = (tool_names(request.body) for request in fake_llm.requests)
    assert not {"web_search", "web_fetch", "http_get"} & set(bare)
    assert "http_get" in with_domains and "web_search" not in with_domains


def test_search_cost_is_known_even_when_the_model_is_unpriced() -> None:
    usage = Usage(input_tokens=1000, output_tokens=10, web_search_requests=3, llm_calls=1)
    assert priced(usage, None).cost_usd == pytest.approx(0.03)
    assert priced(usage, None).unpriced_tokens == 1010
    assert priced(usage, None, 5.0).cost_usd == pytest.approx(0.015)


def test_web_settings_refuse_both_domain_lists_and_urls() -> None:
    with pytest.raises(ValueError, match="cannot both be set"):
        Settings(web_search_allowed_domains=["a.org"], web_search_blocked_domains=["b.org"])
    with pytest.raises(ValueError, match="without http"):
        Settings(web_fetch_allowed_domains=["https://a.org"])


def test_the_planner_catalog_says_what_each_type_can_do_here() -> None:
    registry = builtin_registry()
    bare = RestrictedCatalog(registry, ["researcher", "coder"], Settings()).describe()
    assert "web_search" not in bare and "http_get" not in bare
    assert "    - read_input: Read the output of one of the tasks" in bare
    assert "    - run_python:" in bare
    webbed = Settings(**WEB, http_allowed_domains=["example.com"])
    described = RestrictedCatalog(registry, ["researcher"], webbed).describe()
    searching = "    - web_search: Search the web (run by the Anthropic API; results cited)."
    assert f"{searching} (only: valkey.io)" in described
    assert "    - web_fetch: " in described and "(not: ads.example)" in described
    assert "    - http_get: Fetch a web page" in described and "(only: example.com)" in described


def test_web_requests_are_shown_beside_tokens_and_cost() -> None:
    usage = Usage(input_tokens=900, output_tokens=100, llm_calls=2, cost_usd=0.05)
    assert spend(usage) == " · 1,000 tokens · $0.0500"
    searched = usage.model_copy(update={"web_search_requests": 3, "web_fetch_requests": 1})
    assert spend(searched) == " · 1,000 tokens · 3 web searches · 1 web fetch · $0.0500"


def test_the_web_research_example_is_a_valid_plan_and_script() -> None:
    repo = Path(__file__).resolve().parents[1]
    plan = load_plan(repo / "examples/plans/web-research.yaml")
    registry = builtin_registry()
    assert all(registry.node_problems(node) == [] for node in plan.nodes)
    script = Script.load(repo / "examples/fake-llm/web-research.yaml")
    assert len(script.entries) == 2


def test_a_run_on_a_real_worker_counts_and_prices_its_searches(
    subprocess_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer
) -> None:
    # A worker process of its own: the session's runs with the web tools off.
    settings = subprocess_settings.model_copy(
        update={"web_search": True, "web_search_allowed_domains": ["valkey.io"]}
    )
    fake_llm.add(turn(RESEARCHER, 1, SEARCH_CALL, FOUND, CITED))
    workers.start(settings, concurrency=1)
    plan = PlanBuilder("License")
    plan.agent("research", "researcher", "Find Valkey's license.")
    state = Client(settings).submit(plan.build()).wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, state.nodes
    assert state.result == "Valkey is BSD-licensed.\n\nSources:\n- Valkey <https://valkey.io/>"
    [body] = [request.body for request in fake_llm.requests]
    assert tool_names(body)[1] == "web_search"
    assert body["tools"][1]["allowed_domains"] == ["valkey.io"]
    node, run = state.nodes["research"].usage, state.usage
    assert node.web_search_requests == run.web_search_requests == 1
    tokens_only = priced(run.model_copy(update={"web_search_requests": 0}), price_of_default())
    assert run.cost_usd == pytest.approx(tokens_only.cost_usd + 0.01)
