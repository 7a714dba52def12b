"""An LLMRequest as the Messages API body: thinking, effort, sampling parameters and
forced tool use only where the model takes them; context management (beta) as asked;
prompt-cache breakpoints where they pay (``llm/prompt_caching.py``; not the response
cache, ``llm/response_cache.py``).
"""

from __future__ import annotations

from typing import Any

from dagwright.llm.context_management import CONTEXT_MANAGEMENT_BETA
from dagwright.llm.effort import takes_effort
from dagwright.llm.messages_api_rules import (
    BETWEEN_TOOLS_REFUSED_EFFORTS,
    refuses_budget_thinking,
    refuses_forced_tool_choice,
    refuses_sampling,
    refuses_thinking_disabled,
    takes_between_tools,
)
from dagwright.llm.prompt_caching import (
    CacheReach,
    cache_marker,
    marked_messages,
    marked_tools,
    system_blocks,
)
from dagwright.llm.protocol import LLMRequest

FORCED_TOOL_CHOICES = frozenset({"any", "tool"})


def message_body(request: LLMRequest) -> dict[str, Any]:
    """The keyword arguments of ``messages.create`` for ``request`` (``extra_body`` holds
    what the SDK's signature no longer names)."""
    marker = cache_marker(request)
    reach = CacheReach(request) if marker is not None else None
    body: dict[str, Any] = {
        "model": request.model,
        "system": system_blocks(request, marker, reach),
        "messages": marked_messages(request.messages, marker, reach),
        "max_tokens": request.max_tokens,
    }
    if request.tools:
        body["tools"] = marked_tools(request, marker, reach)
    thinking = thinking_for(request.model, request.thinking, request.effort)
    if thinking is not None:
        body["thinking"] = thinking
    tool_choice = tool_choice_for(request.model, request.tool_choice, thinking)
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    if request.effort is not None and takes_effort(request.model):
        body["output_config"] = {"effort": request.effort}
    if takes_temperature(request.model, thinking, request.temperature):
        body["extra_body"] = {"temperature": request.temperature}
    body.update(context_management_fields(request))
    return body


def takes_temperature(
    model: str, thinking: dict[str, Any] | None, temperature: float | None
) -> bool:
    """Whether ``temperature`` goes in the body: not to a model that refuses sampling
    parameters, nor (unless it is 1) beside thinking, which takes no other."""
    if temperature is None or refuses_sampling(model):
        return False
    thinks = thinking is not None and thinking.get("type") != "disabled"
    return temperature == 1 or not thinks


def thinking_for(
    model: str, thinking: dict[str, Any] | None, effort: str | None = None
) -> dict[str, Any] | None:
    """``thinking`` as ``model`` takes it (the migration guides' 400s never sent): a budget
    where the model thinks only adaptively becomes adaptive; thinking turned off where it
    cannot be becomes ``between_tools`` (the lowest setting, where the model has it and
    the effort allows it) or is left out (the model's default). None: no field."""
    kind = thinking.get("type") if thinking is not None else None
    if kind == "enabled" and refuses_budget_thinking(model):
        return {"type": "adaptive"}
    between_tools = takes_between_tools(model) and effort not in BETWEEN_TOOLS_REFUSED_EFFORTS
    if kind == "disabled" and refuses_thinking_disabled(model):
        return {"type": "between_tools"} if between_tools else None
    if kind == "between_tools" and not between_tools:
        return None  # adaptive, the default, is the nearest setting the model takes here
    return thinking


def tool_choice_for(
    model: str, tool_choice: dict[str, Any] | None, thinking: dict[str, Any] | None
) -> dict[str, Any] | None:
    """``tool_choice`` as ``model`` takes it: forced tool use (``any``, ``tool``) becomes
    ``auto`` where the model refuses it (from the 5.5 models on) or beside thinking (a 400
    on every model), ``disable_parallel_tool_use`` kept. The caller's prompt still asks
    for the tool, and checks that it was called. None: no field."""
    if tool_choice is None or tool_choice.get("type") not in FORCED_TOOL_CHOICES:
        return tool_choice
    thinks = thinking is not None and thinking.get("type") != "disabled"
    if not thinks and not refuses_forced_tool_choice(model):
        return tool_choice
    auto: dict[str, Any] = {"type": "auto"}
    if "disable_parallel_tool_use" in tool_choice:
        auto["disable_parallel_tool_use"] = tool_choice["disable_parallel_tool_use"]
    return auto


def context_management_fields(request: LLMRequest) -> dict[str, Any]:
    """The beta fields of ``request``'s context management: ``betas`` names the header,
    and their presence sends the call through the SDK's beta messages
    (``llm/context_management.py``). Empty when the request asks for none."""
    if request.context_management is None:
        return {}
    return {
        "betas": [CONTEXT_MANAGEMENT_BETA],
        "context_management": request.context_management,
    }
