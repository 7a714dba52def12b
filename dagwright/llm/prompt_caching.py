"""Prompt-cache breakpoints: where a Messages API request body carries ``cache_control``
(the API's prompt caching; the response cache, which answers a repeated request without
calling the API, is ``llm/response_cache.py``). ``llm/wire.py`` builds the body with them.

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

from dagwright.llm.messages_api_rules import min_cacheable_tokens
from dagwright.llm.protocol import LLMRequest, rough_tokens

MAX_BREAKPOINTS = 4
UNCACHEABLE_BLOCKS = frozenset({"thinking", "redacted_thinking"})


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
