"""The fake Anthropic API refuses what the real Messages API refuses, with its errors.

Driven through the real ``anthropic`` SDK (``max_retries=0``): each request here is one our
client could build, and each must fail offline as it would against the real API.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import pytest

from dagwright.llm.messages_api_rules import refuses_sampling, takes_one_sampler
from dagwright.llm.sdk_models import sdk_model_ids
from dagwright.testing import FakeAnthropicServer, Script
from tests.test_fake_anthropic import post_messages

MODEL = "claude-sonnet-4-6"  # takes sampling parameters (one at a time) and budgets
NO_SAMPLING_MODEL = "claude-sonnet-5-5"
# Writes at most 64k and takes a prefill; retires on 2027-01-22, after the fake's TODAY.
OLDER_MODEL = "claude-opus-4-5"
TODAY = dt.date(2026, 11, 28)  # the fake's calendar: which models are retired is fixed
EMPTY = "messages.0: all messages must have non-empty content"
UNANSWERED = (
    "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: "
)
ORPHAN = "unexpected `tool_use_id` found in `tool_result` blocks: "
TOOL = {"name": "search", "description": "Search.", "input_schema": {"type": "object"}}


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def call(tool_id: str = "toolu_1", name: str = "search") -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {}}


def result(tool_id: str = "toolu_1") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "found"}


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    script = Script.model_validate(
        {
            "models": ["my-finetune"],
            "default": {"reply": {"content": [{"type": "text", "text": "ok"}]}},
        }
    )
    with FakeAnthropicServer(script, extra_models=["from-the-cli"], today=lambda: TODAY) as fake:
        yield fake


@pytest.fixture
def client(server: FakeAnthropicServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(api_key="sk-test", base_url=server.base_url, max_retries=0) as sdk:
        yield sdk


def send(client: anthropic.Anthropic, **overrides: Any) -> Any:
    request: dict[str, Any] = {"model": MODEL, "max_tokens": 2048, "messages": [user("hi")]}
    extra = {
        name: overrides.pop(name) for name in ("temperature", "top_p", "top_k") if name in overrides
    }
    request.update(overrides)
    return client.messages.create(**request, extra_body=extra or None)


def refusal(client: anthropic.Anthropic, **overrides: Any) -> str:
    with pytest.raises(anthropic.BadRequestError) as caught:
        send(client, **overrides)
    assert caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    return caught.value.api_message or ""


# Models


def test_the_sdks_models_and_the_scripts_and_the_clis_are_accepted(
    client: anthropic.Anthropic,
) -> None:
    assert {"claude-sonnet-5-5", "claude-opus-4-7"} <= sdk_model_ids()
    for model in ("claude-haiku-5-5", "my-finetune", "from-the-cli"):
        assert send(client, model=model).content[0].text == "ok"


def test_an_unknown_model_is_the_real_apis_404(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    with pytest.raises(anthropic.NotFoundError) as caught:
        send(client, model="claude-test")

    assert caught.value.body["error"] == {
        "type": "not_found_error",
        "message": "model: claude-test",
    }  # type: ignore[index]
    assert server.requests[0].answered_by == "rejected"


def test_the_cli_env_var_adds_models(monkeypatch: pytest.MonkeyPatch) -> None:
    from dagwright.testing.fake_anthropic import EXTRA_MODELS_ENV, _extra_models

    monkeypatch.setenv(EXTRA_MODELS_ENV, "a-model, b-model,")
    assert _extra_models(["c-model"]) == ["c-model", "a-model", "b-model"]


# max_tokens


@pytest.mark.parametrize(
    ("max_tokens", "message"),
    [
        (None, "max_tokens: Field required"),
        ("8", "max_tokens: Input should be a valid integer"),
        (0, "max_tokens: Input should be greater than or equal to 1"),
        (
            64_001,  # the SDK itself refuses to send this without streaming
            "max_tokens: 64001 > 64000, which is the maximum allowed number of output tokens "
            "for claude-opus-4-5",
        ),
    ],
)
def test_max_tokens_missing_or_out_of_range_is_refused(
    server: FakeAnthropicServer, max_tokens: object, message: str
) -> None:
    body: dict[str, Any] = {"model": OLDER_MODEL, "messages": [user("hi")]}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens

    status, answer = post_messages(server, body, **{"x-api-key": "k"})

    assert (status, answer["error"]) == (400, {"type": "invalid_request_error", "message": message})


# Sampling parameters


@pytest.mark.parametrize("parameter", ["temperature", "top_p", "top_k"])
def test_a_model_without_sampling_refuses_each_sampling_parameter(
    client: anthropic.Anthropic, parameter: str
) -> None:
    assert refuses_sampling(NO_SAMPLING_MODEL)
    message = refusal(
        client, model=NO_SAMPLING_MODEL, **{parameter: 0 if parameter != "top_k" else 5}
    )
    assert message == f"`{parameter}` is deprecated for this model."


def test_a_one_sampler_model_refuses_temperature_with_top_p(client: anthropic.Anthropic) -> None:
    assert takes_one_sampler(MODEL)
    assert send(client, temperature=0).content[0].text == "ok"
    assert refusal(client, temperature=0.5, top_p=0.9).startswith(
        "`temperature` and `top_p` cannot both be specified for this model."
    )


def test_temperature_above_one_is_refused(client: anthropic.Anthropic) -> None:
    assert (
        refusal(client, temperature=1.5) == "temperature: Input should be less than or equal to 1"
    )


# Thinking


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"thinking": {"type": "enabled", "budget_tokens": 512}},
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 4096}},
            "`max_tokens` must be greater than `thinking.budget_tokens`.",
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 1024}, "temperature": 0.2},
            "`temperature` may only be set to 1 when thinking is enabled.",
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 1024}, "top_k": 5},
            "`top_k` must be unset when thinking is enabled.",
        ),
        (
            {
                "thinking": {"type": "enabled", "budget_tokens": 1024},
                "tools": [TOOL],
                "tool_choice": {"type": "any"},
            },
            "Thinking may not be enabled when tool_choice forces tool use.",
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 1024}, "model": NO_SAMPLING_MODEL},
            "thinking.type.enabled is not supported for this model.",
        ),
    ],
)
def test_a_bad_thinking_config_is_refused(
    client: anthropic.Anthropic, overrides: dict[str, Any], message: str
) -> None:
    assert refusal(client, **overrides).startswith(message)


def test_a_sound_thinking_config_is_taken(client: anthropic.Anthropic) -> None:
    thinking = {"type": "enabled", "budget_tokens": 1024}
    assert send(client, thinking=thinking, temperature=1).content[0].text == "ok"
    assert (
        send(client, model=NO_SAMPLING_MODEL, thinking={"type": "adaptive"}).content[0].text == "ok"
    )


# Tools


@pytest.mark.parametrize("name", ["has space", "dotted.name", "x" * 65, ""])
def test_a_tool_name_off_the_apis_pattern_is_refused(
    client: anthropic.Anthropic, name: str
) -> None:
    message = refusal(client, tools=[{**TOOL, "name": name}])
    assert message == "tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'"


def test_duplicate_tool_names_are_refused(client: anthropic.Anthropic) -> None:
    assert refusal(client, tools=[TOOL, TOOL]) == "tools: Tool names must be unique."


def test_a_server_tool_needs_no_input_schema(client: anthropic.Anthropic) -> None:
    web_search = {"type": "web_search_20250305", "name": "web_search"}
    assert send(client, tools=[TOOL, web_search]).content[0].text == "ok"


# The conversation


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        (
            [user("")],
            EMPTY + " except for the optional final assistant message",
        ),
        (
            [user("hi"), assistant([]), user("again")],
            "messages.1: all messages must have non-empty content",
        ),
        ([user([{"type": "text", "text": ""}])], "messages: text content blocks must be non-empty"),
        (
            [user("hi"), assistant("Sure, ")],
            "messages: final assistant content cannot end with trailing whitespace",
        ),
        (
            [user("hi"), assistant([call()]), user("no results given")],
            UNANSWERED + "toolu_1.",
        ),
        (
            [user("hi"), assistant([call("toolu_1"), call("toolu_2")]), user([result("toolu_1")])],
            UNANSWERED + "toolu_2.",
        ),
        (
            [user([result("toolu_9")])],
            "messages.0.content.0: " + ORPHAN + "toolu_9.",
        ),
        (
            [user("hi"), assistant([call()]), user([result(), result("toolu_7")])],
            "messages.2.content.1: " + ORPHAN + "toolu_7.",
        ),
        (
            [user("hi"), assistant([call()]), user([{"type": "text", "text": "here:"}, result()])],
            "messages.2: `tool_result` blocks must come first in the user message content",
        ),
        (
            [user("hi"), assistant([call(), call()]), user([result(), result()])],
            "messages.1: `tool_use` ids must be unique",
        ),
    ],
)
def test_a_conversation_the_api_refuses_is_refused(
    client: anthropic.Anthropic, messages: list[dict[str, Any]], message: str
) -> None:
    assert refusal(client, model=OLDER_MODEL, messages=messages).startswith(message)


def test_an_empty_final_assistant_turn_is_a_prefill(client: anthropic.Anthropic) -> None:
    prefill = [user("hi"), assistant("")]
    assert send(client, model=OLDER_MODEL, messages=prefill).content[0].text == "ok"
    answered = [user("hi"), assistant([call()]), user([result(), {"type": "text", "text": "go"}])]
    assert send(client, messages=answered).content[0].text == "ok"


# Cache breakpoints


def cached_text(text: str, ttl: str | None = None) -> dict[str, Any]:
    cache_control = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    return {"type": "text", "text": text, "cache_control": cache_control}


def test_more_than_four_cache_breakpoints_are_refused(client: anthropic.Anthropic) -> None:
    system = [cached_text(f"part {i}") for i in range(5)]
    assert (
        refusal(client, system=system)
        == "A maximum of 4 blocks with cache_control may be provided. Found 5."
    )


def test_a_one_hour_breakpoint_after_a_five_minute_one_is_refused(
    client: anthropic.Anthropic,
) -> None:
    system = [cached_text("short-lived"), cached_text("long-lived", "1h")]
    assert "must not come after a ttl='5m'" in refusal(client, system=system)


THINKING = {"type": "enabled", "budget_tokens": 1024}
THOUGHT = {"type": "thinking", "thinking": "Search first.", "signature": "sig_1"}


def test_with_thinking_on_a_tool_turn_must_send_its_thinking_back(
    client: anthropic.Anthropic,
) -> None:
    without = [user("hi"), assistant([call()]), user([result()])]
    message = refusal(client, thinking=THINKING, messages=without)
    assert message.startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        "`tool_use`. When `thinking` is enabled, a final `assistant` message must start"
    )
    with_thinking = [user("hi"), assistant([THOUGHT, call()]), user([result()])]
    assert send(client, thinking=THINKING, messages=with_thinking).content[0].text == "ok"
    assert send(client, messages=without).content[0].text == "ok"  # thinking off: no need


def test_a_thinking_block_sent_back_needs_its_signature(client: anthropic.Anthropic) -> None:
    unsigned = {"type": "thinking", "thinking": "Search first."}
    messages = [user("hi"), assistant([unsigned, call()]), user([result()])]
    message = refusal(client, messages=messages)
    assert message == "messages.1.content.0.thinking.signature: Field required"


def test_the_cli_takes_repeated_model_flags() -> None:
    from dagwright.testing.fake_anthropic import _parse_args

    args = _parse_args(["--script", "s.yaml", "--model", "a-model", "--model", "b-model"])

    assert args.model == ["a-model", "b-model"]


def test_a_stream_request_is_checked_like_any_other(server: FakeAnthropicServer) -> None:
    body = {"model": MODEL, "max_tokens": 8, "messages": [user("")], "stream": True}

    status, answer = post_messages(server, body, **{"x-api-key": "k"})

    assert status == 400 and answer["error"]["type"] == "invalid_request_error"  # not a stream


# Per-model refusals (the migration guides' 400s) and retired models


ALWAYS_THINKING = (
    '"thinking.type.disabled" is not supported for this model. Use "thinking.type.adaptive" '
    'and "output_config.effort" to control thinking behavior.'
)
FORCED = (
    "Forced tool use is not supported for this model: tool_choice.type may be 'auto' or 'none'."
)
PREFILL = "Prefilling assistant messages is not supported for this model."


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (
            {"thinking": {"type": "disabled"}},
            '"thinking.type.disabled" is not supported for this model. Use '
            '"thinking.type.between_tools" to turn off up-front thinking, or '
            '"thinking.type.adaptive" and "output_config.effort" to control thinking behavior.',
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 1024}},
            "thinking.type.enabled is not supported for this model. Use thinking.type.adaptive "
            "and output_config.effort to control thinking behavior.",
        ),
        ({"temperature": 0.5}, "`temperature` is deprecated for this model."),
        ({"messages": [user("List three colours as JSON."), assistant("{")]}, PREFILL),
        ({"tools": [TOOL], "tool_choice": {"type": "any"}}, FORCED),
        ({"tools": [TOOL], "tool_choice": {"type": "tool", "name": "search"}}, FORCED),
        (
            {"thinking": {"type": "between_tools"}, "output_config": {"effort": "xhigh"}},
            "\"thinking.type.between_tools\" is not supported with output_config.effort 'xhigh'. "
            'Use "thinking.type.adaptive" to run at xhigh or max effort.',
        ),
    ],
)
def test_sonnet_5_5_refuses_the_five_settings_of_its_migration_guide(
    client: anthropic.Anthropic, request_: dict[str, Any], message: str
) -> None:
    assert refusal(client, model="claude-sonnet-5-5", **request_) == message


def test_sonnet_5_5_takes_between_tools_auto_tool_choice_and_no_thinking_field(
    client: anthropic.Anthropic,
) -> None:
    model = "claude-sonnet-5-5"
    lowest = {"thinking": {"type": "between_tools"}, "output_config": {"effort": "medium"}}
    assert send(client, model=model, **lowest).content[0].text == "ok"
    auto = {"tools": [TOOL], "tool_choice": {"type": "auto"}}
    assert send(client, model=model, **auto).content[0].text == "ok"
    assert send(client, model=model, tool_choice={"type": "none"}, tools=[TOOL])
    assert send(client, model=model).content[0].text == "ok"


@pytest.mark.parametrize(
    ("model", "request_", "message"),
    [
        ("claude-opus-5-5", {"thinking": {"type": "disabled"}}, ALWAYS_THINKING),
        ("claude-opus-4-7", {"thinking": {"type": "disabled"}}, ALWAYS_THINKING),
        ("claude-fable-5-1", {"thinking": {"type": "disabled"}}, ALWAYS_THINKING),
        ("claude-opus-5-5", {"tools": [TOOL], "tool_choice": {"type": "any"}}, FORCED),
        ("claude-haiku-5-5", {"tools": [TOOL], "tool_choice": {"type": "any"}}, FORCED),
        ("claude-fable-5-1", {"tools": [TOOL], "tool_choice": {"type": "any"}}, FORCED),
        ("claude-opus-4-6", {"messages": [user("hi"), assistant("Sure")]}, PREFILL),
        ("claude-haiku-5-5", {"messages": [user("hi"), assistant("Sure")]}, PREFILL),
        (
            "claude-sonnet-5",
            {"thinking": {"type": "between_tools"}},
            "thinking: Input tag 'between_tools' found using 'type' does not match any of the "
            "expected tags: 'enabled', 'disabled', 'adaptive'",
        ),
    ],
)
def test_each_model_refuses_what_its_migration_guide_says(
    client: anthropic.Anthropic, model: str, request_: dict[str, Any], message: str
) -> None:
    assert refusal(client, model=model, **request_) == message


@pytest.mark.parametrize(
    "request_",
    [
        {"thinking": {"type": "disabled"}},  # Sonnet 5 may still turn thinking off
        {"tools": [TOOL], "tool_choice": {"type": "any"}},  # and force a tool
        {"tools": [TOOL], "tool_choice": {"type": "tool", "name": "search"}},
    ],
)
def test_what_a_newer_model_refuses_an_older_one_takes(
    client: anthropic.Anthropic, request_: dict[str, Any]
) -> None:
    assert send(client, model="claude-sonnet-5", **request_).content[0].text == "ok"


def test_a_tool_choice_of_no_known_type_is_refused(client: anthropic.Anthropic) -> None:
    message = refusal(client, tools=[TOOL], tool_choice={"type": "required"})
    assert message == (
        "tool_choice: Input tag 'required' found using 'type' does not match any of the "
        "expected tags: 'auto', 'any', 'tool', 'none'"
    )


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (
            {"tools": [TOOL], "tool_choice": {"type": "tool", "name": "fetch"}},
            "tool_choice.tool.name: Tool 'fetch' not found in `tools`.",
        ),
        (
            {"tool_choice": {"type": "tool", "name": "search"}},
            "tool_choice: forced tool use requires `tools`, and none were given.",
        ),
        (
            {"tool_choice": {"type": "any"}},
            "tool_choice: forced tool use requires `tools`, and none were given.",
        ),
        (
            {"tools": [TOOL], "tool_choice": {"type": "tool"}},
            "tool_choice.tool.name: Field required",
        ),
        (
            {"tools": [TOOL], "tool_choice": {"type": "tool", "name": 7}},
            "tool_choice.tool.name: Input should be a valid string",
        ),
        (
            {"tools": [TOOL], "tool_choice": {"type": "none", "disable_parallel_tool_use": True}},
            "tool_choice.none.disable_parallel_tool_use: Extra inputs are not permitted",
        ),
        (
            {"tools": [TOOL], "tool_choice": {"type": "auto", "disable_parallel_tool_use": "yes"}},
            "tool_choice.auto.disable_parallel_tool_use: Input should be a valid boolean",
        ),
        (
            {"tools": [TOOL], "tool_choice": {"type": "any", "name": "search"}},
            "tool_choice.any.name: Extra inputs are not permitted",
        ),
        (
            {"tools": [TOOL], "tool_choice": "auto"},
            "tool_choice: Input should be a valid dictionary or object to extract fields from",
        ),
        (
            {
                "thinking": {"type": "adaptive"},
                "tools": [TOOL],
                "tool_choice": {"type": "tool", "name": "search"},
            },
            "Thinking may not be enabled when tool_choice forces tool use.",
        ),
    ],
)
def test_a_tool_choice_the_api_cannot_follow_is_refused(
    client: anthropic.Anthropic, request_: dict[str, Any], message: str
) -> None:
    assert refusal(client, **request_) == message


@pytest.mark.parametrize(
    "tool_choice",
    [
        {"type": "tool", "name": "search", "disable_parallel_tool_use": True},
        {"type": "any", "disable_parallel_tool_use": False},
        {"type": "auto", "disable_parallel_tool_use": True},
        {"type": "none"},
    ],
)
def test_a_tool_choice_of_the_right_shape_is_taken(
    client: anthropic.Anthropic, tool_choice: dict[str, Any]
) -> None:
    assert send(client, tools=[TOOL], tool_choice=tool_choice).content[0].text == "ok"


def retired_404(server: FakeAnthropicServer, model: str) -> dict[str, Any]:
    status, answer = post_messages(
        server, {"model": model, "max_tokens": 8, "messages": [user("hi")]}, **{"x-api-key": "k"}
    )
    assert status == 404
    return dict(answer["error"])


def test_a_retired_model_is_the_real_apis_404_though_the_sdk_still_lists_it(
    server: FakeAnthropicServer,
) -> None:
    assert "claude-mythos-preview" in sdk_model_ids()  # retired on 2026-06-30
    assert retired_404(server, "claude-mythos-preview") == {
        "type": "not_found_error",
        "message": "model: claude-mythos-preview",
    }


def calendar_on(day: dt.date) -> Callable[[], dt.date]:
    return lambda: day


def test_a_model_is_served_until_its_end_of_life_day_then_refused() -> None:
    """claude-sonnet-4-5: end of life 2026-11-30, by the SDK's list (a deliberate use of a
    deprecated model)."""
    body = {"model": "claude-sonnet-4-5-20250929", "max_tokens": 8, "messages": [user("hi")]}
    script = Script.model_validate(
        {"default": {"reply": {"content": [{"type": "text", "text": "ok"}]}}}
    )
    for day, status in ((dt.date(2026, 11, 29), 200), (dt.date(2026, 11, 30), 404)):
        with FakeAnthropicServer(script, today=calendar_on(day)) as fake:
            assert post_messages(fake, body, **{"x-api-key": "k"})[0] == status
