"""What an LLM call is, independent of any provider: requests, responses, the protocol."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from dagwright.models import Usage

# Tokens are estimated before a call (budgets, rate limits) from the characters sent:
# rough on purpose, erring high for English, and corrected by the usage the API reports.
CHARS_PER_TOKEN = 4


def rough_tokens(text: str) -> int:
    """An estimate of the tokens ``text`` takes, before the API counts them."""
    return len(text) // CHARS_PER_TOKEN


class LLMRequest(BaseModel):
    """One Messages API call. ``messages`` and ``tools`` use the Messages API's JSON shapes,
    the lingua franca of agent loops (and of checkpoints)."""

    model_config = ConfigDict(frozen=True)

    model: str
    system: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = Field(default_factory=list)
    max_tokens: int = 4096
    temperature: float | None = None
    """Only for models that still accept sampling parameters (newer ones answer 400)."""

    def canonical_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

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

    def tool_uses(self) -> list[dict[str, Any]]:
        return [block for block in self.content if block.get("type") == "tool_use"]

    def text(self) -> str:
        texts = [block.get("text", "") for block in self.content if block.get("type") == "text"]
        return "".join(texts)


class LLM(Protocol):
    """Anything that answers a Messages API request (the Anthropic API, a cache, a fake)."""

    def complete(self, request: LLMRequest) -> LLMResponse: ...
