"""What an LLM call is, independent of any provider: requests, responses, the protocol."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from dagwright.models import Usage

# Tokens are estimated before a call (budgets, rate limits) from the characters sent:
# rough on purpose, erring high for English, and corrected by the usage the API reports.
CHARS_PER_TOKEN = 4


def rough_tokens(text: str) -> int:
    """An estimate of the tokens ``text`` takes, before the API counts them."""
    return len(text) // CHARS_PER_TOKEN


PromptCacheTTL = Literal["5m", "1h"]
Effort = Literal["low", "medium", "high", "xhigh", "max"]

# How a request is sent or kept, not what it asks: left out of the response cache's key,
# so that switching prompt caching or its TTL does not forget every cached answer.
DELIVERY_FIELDS = frozenset(
    {
        "prompt_cache_ttl",
        "response_cache",
        "volatile_token",
        "cache_conversation",
        "cache_run_prefix",
    }
)
# What stands for ``volatile_token`` in the response cache's key.
VOLATILE_PLACEHOLDER = "VOLATILE"
# Fields added after requests were first cached: left out of the key while unset, so a
# request that does not use them keeps the key it always had.
KEYED_WHEN_SET = ("thinking", "effort", "context_management", "run_system", "tool_choice")


class LLMRequest(BaseModel):
    """One Messages API call. ``messages`` and ``tools`` use the Messages API's JSON shapes,
    the lingua franca of agent loops (and of checkpoints).

    Messages hold no ``cache_control``: prompt-cache breakpoints are placed when the request
    is sent (``dagwright.llm.prompt_caching``), so a checkpointed conversation never
    accumulates them.
    """

    model_config = ConfigDict(frozen=True)

    model: str
    system: str
    """The agent type's prompt: the same for every node of the type, in any run."""
    run_system: str | None = None
    """A second system block, after ``system``: what every node of one run is told alike
    (today's date, the submitter's goal and context), the same byte for byte across the
    run's nodes so that they share its cached prefix. None: no second block."""
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: dict[str, Any] | None = None
    """The Messages API's ``tool_choice`` (``{"type": "tool", "name": ...}`` forces that
    tool); None: not sent (the API's default, ``auto``). Forced tool use goes only to
    models that take it, and not beside thinking: ``llm/wire.py`` sends ``auto`` there."""
    max_tokens: int = 4096
    temperature: float | None = None
    """Sent only to models that still accept sampling parameters (``messages_api_rules``)."""
    thinking: dict[str, Any] | None = None
    """The Messages API's ``thinking`` object, e.g. ``{"type": "adaptive"}``; None: not sent."""
    effort: Effort | None = None
    """``output_config.effort``; None: the model's default."""
    context_management: dict[str, Any] | None = None
    """The Messages API's ``context_management`` (``{"edits": [...]}``, sent with its beta
    header, ``llm/context_management.py``); None: not sent."""
    prompt_cache_ttl: PromptCacheTTL | None = None
    """Prompt-cache breakpoints on tools, system and the conversation's tail, kept this long;
    None: no breakpoints."""
    cache_conversation: bool = True
    """Whether the conversation's tail gets prompt-cache breakpoints: only when a later call
    will read it back (the agent may take another turn); the system blocks are marked
    too then (``llm/wire.py``)."""
    cache_run_prefix: bool = False
    """Whether other nodes of the run will send the same tools and system blocks, and so
    read their cached prefix back: the system blocks get breakpoints even when the
    conversation gets none."""
    response_cache: bool = False
    """Whether a response cache may answer this request from an earlier identical one."""
    volatile_token: str = ""
    """A random token in the request's text that changes from run to run and means nothing
    to the answer (the tags of untrusted data, ``workers/untrusted.py``): replaced by a
    placeholder in the response cache's key, so that the same work in another run still
    finds its answer. Never sent."""

    def system_texts(self) -> list[str]:
        """The system prompt's blocks, in order (empty ones left out)."""
        return [text for text in (self.system, self.run_system) if text]

    def canonical_json(self) -> str:
        """The request as sorted JSON, without how it is delivered (``DELIVERY_FIELDS``)."""
        fields = self.model_dump(mode="json", exclude=set(DELIVERY_FIELDS))
        for name in KEYED_WHEN_SET:
            if fields[name] is None:
                del fields[name]
        canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        if self.volatile_token:
            canonical = canonical.replace(self.volatile_token, VOLATILE_PLACEHOLDER)
        return canonical

    def digest(self) -> str:
        """sha256 of the canonical request: the response cache's key."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()


class LLMResponse(BaseModel):
    """The assistant's answer, its usage (with cost) and how long it took."""

    model_config = ConfigDict(frozen=True)

    content: list[dict[str, Any]]
    stop_reason: str
    model: str
    usage: Usage
    request_id: str | None = None
    latency_s: float = 0.0
    cached: bool = False
    context_edits: list[dict[str, Any]] = Field(default_factory=list)
    """The ``context_management.applied_edits`` the API reports: what it cleared from the
    prompt before the model read it (``cleared_tool_uses``, ``cleared_input_tokens``)."""

    def tool_uses(self) -> list[dict[str, Any]]:
        return [block for block in self.content if block.get("type") == "tool_use"]

    def text(self) -> str:
        texts = [block.get("text", "") for block in self.content if block.get("type") == "text"]
        return "".join(texts)


class LLM(Protocol):
    """Anything that answers a Messages API request (the Anthropic API, a cache, a fake)."""

    def complete(self, request: LLMRequest) -> LLMResponse: ...
