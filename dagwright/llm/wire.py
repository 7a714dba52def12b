"""An LLMRequest as the Messages API body: prompt-cache breakpoints, thinking, effort,
sampling parameters and forced tool use only where the model takes them; context
management (beta) as asked.

Prompt caching. The API caches the prefix of a request up to each ``cache_control``
breakpoint (tools, then system, then messages, in that order) and, on a later request,
looks back up to 20 blocks from each breakpoint for a prefix it has cached. Writing a
prefix costs 1.25 times its input price (2 times for an hour), reading it 0.1 times; a
prefix shorter than the model's minimum (``messages_api_rules.MIN_CACHEABLE_TOKENS``) is
neither. So a breakpoint goes only where its prefix is long enough to cache and someone
will read it back; the tokens written are those up to the *last* breakpoint, so one that
sits before another costs nothing more. The system prompt is two blocks: the agent type's
prompt, then the run's (date, the submitter's goal and context: ``LLMRequest.run_system``),
alike for every node of the run. The breakpoints:

1. the type's system prompt: tools and type prompt, the same for every node of the type
   in every run (the tools have no breakpoint of their own: nothing reads them back
   without the prompt after them, unless there is no system prompt);
2. the run's system block: what the run's nodes of one type share, read back by the
   other nodes (``cache_run_prefix``: the caller knows the run has them) and by the
   node's own next turns;
3. the last block of the last message: this turn's whole prefix, which the next turn
   reads back; only when the agent may take another turn (``cache_conversation``): a
   one-turn node would pay the write and never read it;
4. the last block of the message that ended the previous request (the one before the
   latest assistant turn): the prefix the previous turn wrote, read exactly even when a
   turn added more than the 20 blocks the lookback covers (many parallel tool calls).

That is the API's limit of four. Breakpoints 1 and 2 are placed when 3 is (they cost
nothing then) or when the run's other nodes read them. Thinking blocks cannot carry
``cache_control``, nor can empty text; the breakpoint then goes on the nearest block before
it in the message, or is left out. The breakpoints are added to copies: the caller's
messages (and so the checkpoints made of them) never hold any.

Rejected: a breakpoint on every cacheable boundary (a one-turn node paid 25% more for a
write it never read); the run's goal and context in the first message (each node's own
data fence came first, so no two nodes shared a cached prefix).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from dagwright.llm.context_management import CONTEXT_MANAGEMENT_BETA
from dagwright.llm.effort import takes_effort
from dagwright.llm.messages_api_rules import (
    BETWEEN_TOOLS_REFUSED_EFFORTS,
    min_cacheable_tokens,
    refuses_budget_thinking,
    refuses_forced_tool_choice,
    refuses_sampling,
    refuses_thinking_disabled,
    takes_between_tools,
)
from dagwright.llm.protocol import LLMRequest, rough_tokens

MAX_BREAKPOINTS = 4
UNCACHEABLE_BLOCKS = frozenset({"thinking", "redacted_thinking"})
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


def cache_marker(request: LLMRequest) -> dict[str, str] | None:
    """The ``cache_control`` of each breakpoint; None: prompt caching is off."""
    if request.prompt_cache_ttl is None:
        return None
    if request.prompt_cache_ttl == "5m":  # the API's default: the shortest marker
        return {"type": "ephemeral"}
    return {"type": "ephemeral", "ttl": request.prompt_cache_ttl}


class CacheReach:
    """Where a request's breakpoints pay: the size of each prefix, by its characters
    (``rough_tokens``: an estimate that errs high, so a prefix the API would cache is not
    left unmarked), against the model's minimum, and who reads them back."""

    def __init__(self, request: LLMRequest) -> None:
        self.minimum = min_cacheable_tokens(request.model)
        self.conversation = request.cache_conversation
        self.shared = request.cache_conversation or request.cache_run_prefix
        tools = rough_tokens(json.dumps(request.tools)) if request.tools else 0
        self.system_ends: list[int] = []
        for text in request.system_texts():
            tools += rough_tokens(json.dumps({"type": "text", "text": text}))
            self.system_ends.append(tools)
        self.message_ends: list[int] = []
        for message in request.messages:
            tools += rough_tokens(json.dumps(message.get("content")))
            self.message_ends.append(tools)

    def marks_system(self, index: int) -> bool:
        """Whether system block ``index`` gets a breakpoint (1 or 2)."""
        return self.shared and self.system_ends[index] >= self.minimum

    def marks_message(self, index: int) -> bool:
        """Whether message ``index`` (a tail: 3 or 4) gets a breakpoint."""
        return self.conversation and self.message_ends[index] >= self.minimum

    def marks_tools(self, tools: list[dict[str, Any]]) -> bool:
        """The tools carry one only with no system prompt to carry it after them."""
        prefix = rough_tokens(json.dumps(tools))
        return not self.system_ends and self.shared and prefix >= self.minimum


def system_blocks(
    request: LLMRequest,
    marker: dict[str, str] | None,
    reach: CacheReach | None = None,
) -> str | list[dict[str, Any]]:
    """The system prompt: the bare string when it is one block with no breakpoint, else
    its text blocks (breakpoints 1 and 2 of the module's docstring where they pay)."""
    texts = request.system_texts()
    marked = [
        marker is not None and reach is not None and reach.marks_system(i)
        for i in range(len(texts))
    ]
    if len(texts) <= 1 and not any(marked):
        return request.system
    blocks: list[dict[str, Any]] = []
    for text, mark in zip(texts, marked, strict=True):
        block: dict[str, Any] = {"type": "text", "text": text}
        if mark and marker is not None:
            block["cache_control"] = dict(marker)
        blocks.append(block)
    return blocks


def marked_tools(
    request: LLMRequest, marker: dict[str, str] | None, reach: CacheReach | None
) -> list[dict[str, Any]]:
    tools = request.tools
    if marker is None or reach is None or not reach.marks_tools(tools):
        return tools
    marked = [dict(tool) for tool in tools]
    marked[-1]["cache_control"] = dict(marker)
    return marked


def marked_messages(
    messages: list[dict[str, Any]],
    marker: dict[str, str] | None,
    reach: CacheReach | None = None,
) -> list[dict[str, Any]]:
    """Copies of ``messages`` with breakpoints 3 and 4 of the module's docstring."""
    if marker is None or not messages:
        return messages
    tails = [i for i in tail_indexes(messages) if reach is None or reach.marks_message(i)]
    if not tails:
        return messages
    marked = copy.deepcopy(messages)
    for index in tails:
        mark_last_block(marked, index, marker)
    return marked


def tail_indexes(messages: list[dict[str, Any]]) -> list[int]:
    """The last message, and the one that ended the previous request, if any."""
    tails = [len(messages) - 1]
    assistant_turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if assistant_turns and assistant_turns[-1] > 0:
        previous_tail = assistant_turns[-1] - 1
        if previous_tail not in tails:
            tails.append(previous_tail)
    return tails


def mark_last_block(messages: list[dict[str, Any]], index: int, marker: dict[str, str]) -> None:
    message = messages[index]
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return
        content = [{"type": "text", "text": content}]
        message["content"] = content
    if not isinstance(content, list):
        return
    for block in reversed(content):
        if block.get("type") in UNCACHEABLE_BLOCKS:
            continue
        if block.get("type") == "text" and not block.get("text"):
            continue
        block["cache_control"] = dict(marker)
        return


def breakpoints(body: dict[str, Any]) -> int:
    """How many ``cache_control`` markers ``body`` carries (at most ``MAX_BREAKPOINTS``)."""
    blocks: list[Any] = list(body.get("tools", []))
    if isinstance(body.get("system"), list):
        blocks += body["system"]
    for message in body.get("messages", []):
        if isinstance(message.get("content"), list):
            blocks += message["content"]
    return sum(1 for block in blocks if isinstance(block, dict) and "cache_control" in block)
