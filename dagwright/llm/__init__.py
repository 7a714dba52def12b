"""LLM access: a provider-neutral protocol, the Anthropic implementation, a response cache.

``anthropic`` is imported by ``dagwright.llm.anthropic`` alone.
"""

from __future__ import annotations

import redis

from dagwright.keys import Keys
from dagwright.llm.cache import CachingLLM
from dagwright.llm.protocol import LLM, LLMRequest, LLMResponse
from dagwright.llm.ratelimit import RateLimitedLLM
from dagwright.resilience import Breakers
from dagwright.settings import Settings


def build_llm(
    settings: Settings, client: redis.Redis | None, keys: Keys, breakers: Breakers | None = None
) -> LLM:
    """The LLM every agent of this process uses (raises LLMNotConfiguredError at once if
    neither an API key nor a base URL is set): behind a circuit breaker per model if given
    ``breakers``, rate-limited per model (``llm_rate_limits``) and cached in Redis if
    enabled and given a client."""
    from dagwright.llm.anthropic import AnthropicLLM  # the SDK loads only where LLMs run

    llm: LLM = AnthropicLLM(settings, breakers)
    if settings.llm_rate_limits and client is not None:  # inside the cache: a hit is free
        llm = RateLimitedLLM(
            llm,
            client,
            keys,
            limits=settings.llm_rate_limits,
            window_s=settings.llm_rate_window_s,
            max_wait_s=settings.llm_rate_max_wait_s,
            hold_s=settings.llm_timeout_s * settings.llm_max_attempts,
        )
    if settings.llm_cache_enabled and client is not None:
        llm = CachingLLM(llm, client, keys, ttl_s=settings.llm_cache_ttl_s)
    return llm


__all__ = ["LLM", "CachingLLM", "LLMRequest", "LLMResponse", "RateLimitedLLM", "build_llm"]
