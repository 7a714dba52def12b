"""Every request dagwright builds passes the strict fake, for every current model.

The migration guides make requests that one model takes a 400 on the next (thinking
turned off, a thinking budget, sampling parameters). An agent type's ``thinking`` and
``temperature`` are the user's; the body is fitted to the model (llm/wire.py), so none of
them reaches a model that refuses it. Through the real SDK and AnthropicLLM.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from dagwright.llm.anthropic import AnthropicLLM
from dagwright.llm.model_lifecycle import retired_problem
from dagwright.llm.protocol import LLMRequest
from dagwright.llm.sdk_models import sdk_model_ids
from dagwright.llm.wire import message_body, thinking_for
from dagwright.settings import Settings
from dagwright.testing import FakeAnthropicServer, Script

TODAY = dt.date(2026, 11, 28)
TOOLS = [{"name": "lookup", "description": "Look up.", "input_schema": {"type": "object"}}]
THINKING: list[dict[str, Any] | None] = [
    None,
    {"type": "adaptive"},
    {"type": "disabled"},
    {"type": "enabled", "budget_tokens": 2048},
    {"type": "between_tools"},
]
EFFORTS = [None, "medium", "xhigh"]
TEMPERATURES = [None, 0.3]
TOOL_CHOICES: list[dict[str, Any] | None] = [None, {"type": "tool", "name": "lookup"}]


def current_models() -> list[str]:
    return sorted(model for model in sdk_model_ids() if retired_problem(model, TODAY) is None)


@pytest.fixture(scope="module")
def llm() -> Iterator[AnthropicLLM]:
    script = Script.model_validate(
        {"default": {"reply": {"content": [{"type": "text", "text": "ok"}]}}}
    )
    with FakeAnthropicServer(script, today=lambda: TODAY) as fake:
        settings = Settings(
            anthropic_api_key="sk-test",
            anthropic_base_url=fake.base_url,
            llm_max_attempts=1,
            model_lifecycle_date=TODAY,
        )
        yield AnthropicLLM(settings.llm)


@pytest.mark.parametrize("model", current_models())
def test_every_request_dagwright_builds_is_taken_by_every_current_model(
    llm: AnthropicLLM, model: str
) -> None:
    combinations = itertools.product(THINKING, EFFORTS, TEMPERATURES, TOOL_CHOICES)
    for thinking, effort, temperature, tool_choice in combinations:
        request = LLMRequest(
            model=model,
            system="You test.",
            messages=[{"role": "user", "content": "Look it up."}],
            tools=TOOLS,
            max_tokens=4096,
            thinking=thinking,
            effort=effort,
            temperature=temperature,
            tool_choice=tool_choice,
            prompt_cache_ttl="5m",
        )
        answer = llm.complete(request).text()
        assert answer == "ok", (thinking, effort, temperature, tool_choice)


def test_the_retired_models_are_not_among_them() -> None:
    assert "claude-mythos-preview" in sdk_model_ids()
    assert "claude-mythos-preview" not in current_models()
    assert "claude-sonnet-5-5" in current_models()


@pytest.mark.parametrize(
    ("model", "thinking", "effort", "sent"),
    [
        ("claude-sonnet-5-5", {"type": "disabled"}, None, {"type": "between_tools"}),
        ("claude-sonnet-5-5", {"type": "disabled"}, "max", None),  # between_tools: up to high
        ("claude-opus-5-5", {"type": "disabled"}, None, None),  # it always thinks
        ("claude-sonnet-5", {"type": "disabled"}, None, {"type": "disabled"}),
        (
            "claude-sonnet-5-5",
            {"type": "enabled", "budget_tokens": 2048},
            None,
            {"type": "adaptive"},
        ),
        ("claude-sonnet-4-6", {"type": "enabled", "budget_tokens": 2048}, None, None),
        ("claude-sonnet-5", {"type": "between_tools"}, None, None),
        ("claude-sonnet-5-5", {"type": "adaptive"}, "max", {"type": "adaptive"}),
    ],
)
def test_thinking_is_fitted_to_the_model(
    model: str, thinking: dict[str, Any], effort: str | None, sent: dict[str, Any] | None
) -> None:
    expected = thinking if sent is None and model == "claude-sonnet-4-6" else sent
    assert thinking_for(model, thinking, effort) == expected
    body = message_body(LLMRequest(model=model, system="s", messages=[], thinking=thinking))
    assert body.get("thinking") == thinking_for(model, thinking)
