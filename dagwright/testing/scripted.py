"""A scripted in-process LLM, for unit tests of agent code without any HTTP.

    llm = ScriptedLLM([tool_use("read_input", {"node": "a"}), text("done")])

Each ``complete()`` returns (or raises) the next scripted item and logs the request.
For tests through the real SDK, use ``FakeAnthropicServer`` instead.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from dagwright.llm.protocol import LLMRequest, LLMResponse
from dagwright.models import Usage

_ids = itertools.count(1)


def reply(
    *blocks: dict[str, Any],
    stop_reason: str | None = None,
    input_tokens: int = 10,
    output_tokens: int = 5,
    cost_usd: float = 0.0,
    model: str = "scripted",
) -> LLMResponse:
    """A response made of content blocks (see ``text_block``, ``tool_use_block``)."""
    has_tool = any(block["type"] == "tool_use" for block in blocks)
    return LLMResponse(
        content=list(blocks),
        stop_reason=stop_reason or ("tool_use" if has_tool else "end_turn"),
        model=model,
        usage=Usage(
            input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost_usd, llm_calls=1
        ),
    )


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_use_block(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_s{next(_ids)}", "name": name, "input": arguments}


def text(answer: str, **usage: Any) -> LLMResponse:
    return reply(text_block(answer), **usage)


def tool_use(name: str, arguments: dict[str, Any], **usage: Any) -> LLMResponse:
    return reply(tool_use_block(name, arguments), **usage)


class ScriptedLLM:
    """Answers requests from a list, in order; an Exception in the list is raised."""

    def __init__(self, script: Iterable[LLMResponse | Exception]) -> None:
        self.script = list(script)
        self.requests: list[LLMRequest] = []

    def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        if not self.script:
            raise AssertionError(f"ScriptedLLM: no answer left for request {len(self.requests)}")
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item
