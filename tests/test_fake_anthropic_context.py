"""Context editing in the fake Messages API, through the real ``anthropic`` SDK: what the
real API refuses in ``context_management`` is refused with a 400, and a valid edit clears
older tool results from the prompt the fake counts, reporting what it cleared."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from dagwright.llm.context_management import (
    CLEARED_RESULT,
    CONTEXT_MANAGEMENT_BETA,
    clear_tool_uses_edit,
)
from dagwright.testing import FakeAnthropicServer, Script

MODEL = "claude-sonnet-5-5"
TOOL = {"name": "read", "description": "Read.", "input_schema": {"type": "object"}}
BIG = "x" * 8_000  # about 2,000 tokens a result


def conversation(calls: int) -> list[dict[str, Any]]:
    """A task, then ``calls`` tool calls each answered with a big result."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read it all."}]
    for n in range(calls):
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": "read", "input": {"n": n}}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": BIG}
        messages += [
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
        ]
    return messages


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    script = {
        "models": ["my-finetune"],
        "default": {"reply": {"content": [{"type": "text", "text": "ok"}]}},
    }
    with FakeAnthropicServer(Script.model_validate(script)) as fake:
        yield fake


@pytest.fixture
def sdk(server: FakeAnthropicServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0)


def managed(sdk: anthropic.Anthropic, edits: list[Any], calls: int = 6, **body: Any) -> Any:
    return sdk.beta.messages.create(
        model=body.pop("model", MODEL),
        max_tokens=100,
        tools=[TOOL],  # type: ignore[list-item]
        messages=conversation(calls),  # type: ignore[arg-type]
        betas=[CONTEXT_MANAGEMENT_BETA],
        context_management={"edits": edits},  # type: ignore[typeddict-item]
        **body,
    )


def test_past_its_trigger_older_tool_results_are_cleared_and_reported(
    sdk: anthropic.Anthropic, server: FakeAnthropicServer
) -> None:
    whole = managed(sdk, [clear_tool_uses_edit(1_000_000, 2, 0)]).usage.input_tokens
    message = managed(sdk, [clear_tool_uses_edit(5_000, 2, 0)])
    edits = message.context_management.applied_edits
    assert [(e.type, e.cleared_tool_uses) for e in edits] == [("clear_tool_uses_20250919", 4)]
    assert 4 * 1_900 < edits[0].cleared_input_tokens < 4 * 2_100
    # what the model read: the whole prompt less what was cleared (each block is
    # counted on its own, so a few tokens of rounding apart)
    assert abs(message.usage.input_tokens - (whole - edits[0].cleared_input_tokens)) < 50
    first, second = (request.body for request in server.requests)
    # the client sent the whole conversation both times: the fake cleared it, as the API does
    assert {**second, "context_management": first["context_management"]} == first


def test_below_its_trigger_or_short_of_clear_at_least_nothing_is_cleared(
    sdk: anthropic.Anthropic,
) -> None:
    assert (
        managed(sdk, [clear_tool_uses_edit(100_000, 2, 0)]).context_management.applied_edits == []
    )
    short = managed(sdk, [clear_tool_uses_edit(5_000, 2, 50_000)])
    assert short.context_management.applied_edits == []


def test_a_streamed_answer_reports_its_edits_in_message_delta(sdk: anthropic.Anthropic) -> None:
    with sdk.beta.messages.stream(
        model=MODEL,
        max_tokens=100,
        tools=[TOOL],  # type: ignore[list-item]
        messages=conversation(6),  # type: ignore[arg-type]
        betas=[CONTEXT_MANAGEMENT_BETA],
        context_management={"edits": [clear_tool_uses_edit(5_000, 3, 0)]},  # type: ignore[typeddict-item]
    ) as stream:
        message = stream.get_final_message()
    assert message.context_management is not None
    assert message.context_management.applied_edits[0].cleared_tool_uses == 3


def test_the_placeholder_replaces_the_results_and_excluded_tools_are_spared() -> None:
    from dagwright.llm.context_management import cleared
    from dagwright.testing.fake_anthropic_tokens import estimate_tokens

    edit = clear_tool_uses_edit(10, 1, 0) | {"exclude_tools": ["keepme"], "clear_tool_inputs": True}
    messages = conversation(3)
    messages[1]["content"][0]["name"] = "keepme"
    edited, applied = cleared(messages, edit, 50_000, estimate_tokens)
    results = [m["content"][0] for m in edited if m["role"] == "user" and m is not edited[0]]
    assert [r["content"] == CLEARED_RESULT for r in results] == [False, True, False]
    assert edited[3]["content"][0]["input"] == {}  # its tool_use input cleared too
    assert applied is not None and applied["cleared_tool_uses"] == 1
    assert messages[4]["content"][0]["content"] == BIG  # the caller's conversation is untouched


REFUSED = [
    ([{"type": "clear_everything"}], "does not match any of the expected tags"),
    ([{"type": "clear_tool_uses_20250919", "keep": {"type": "input_tokens", "value": 3}}],
     "keep.type: Input should be 'tool_uses'"),
    ([{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 0}}],
     "trigger.value: Input should be greater than or equal to 1"),
    ([{"type": "clear_tool_uses_20250919", "clear_at_least": {"type": "tool_uses", "value": 1}}],
     "clear_at_least.type: Input should be 'input_tokens'"),
    ([{"type": "clear_tool_uses_20250919", "placeholder": "gone"}],
     "placeholder: Extra inputs are not permitted"),
    ([{"type": "clear_tool_uses_20250919"}, {"type": "clear_thinking_20251015"}],
     "clear_thinking_20251015 must be the first edit"),
]  # fmt: skip


@pytest.mark.parametrize(("edits", "message"), REFUSED)
def test_a_malformed_context_management_is_refused_with_a_400(
    sdk: anthropic.Anthropic, edits: list[Any], message: str
) -> None:
    with pytest.raises(anthropic.BadRequestError, match=message):
        managed(sdk, edits, calls=0, thinking={"type": "adaptive"})


def test_clearing_thinking_without_thinking_is_refused(sdk: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError, match="requires thinking to be enabled"):
        managed(sdk, [{"type": "clear_thinking_20251015"}])


def test_context_management_without_its_beta_header_is_refused(sdk: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError, match="context_management: Extra inputs"):
        sdk.messages.create(
            model=MODEL,
            max_tokens=100,
            messages=conversation(1),  # type: ignore[arg-type]
            tools=[TOOL],  # type: ignore[list-item]
            extra_body={"context_management": {"edits": [clear_tool_uses_edit(5_000, 2, 0)]}},
        )


def test_a_model_without_context_editing_refuses_it(sdk: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError, match="not supported for model my-finetune"):
        managed(sdk, [clear_tool_uses_edit(5_000, 2, 0)], model="my-finetune")
