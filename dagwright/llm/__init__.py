"""LLM access: a provider-neutral protocol, the Anthropic implementation, a response cache.

``anthropic`` is imported by ``dagwright.llm.anthropic`` alone.
"""

from __future__ import annotations

import redis

from dagwright.keys import Keys
from dagwright.llm.cache import CachingLLM
from dagwright.llm.types import LLM, LLMRequest, LLMResponse
from dagwright.resilience import Breakers
from dagwright.settings import Settings


def build_llm(
    settings: Settings, client: redis.Redis | None, keys: Keys, breakers: Breakers | None = None
) -> LLM:
    """The LLM every agent of this process uses (raises LLMNotConfiguredError at once if
    neither an API key nor a base URL is set): behind a circuit breaker per model if given
    ``breakers``, cached in Redis if enabled and given a client."""
    from dagwright.llm.anthropic import AnthropicLLM  # the SDK loads only where LLMs run

    llm: LLM = AnthropicLLM(settings, breakers)
    if settings.llm_cache_enabled and client is not None:
        llm = CachingLLM(llm, client, keys, ttl_s=settings.llm_cache_ttl_s)
    return llm


__all__ = ["LLM", "CachingLLM", "LLMRequest", "LLMResponse", "build_llm"]
