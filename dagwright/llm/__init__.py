"""LLM access: a provider-neutral protocol, the Anthropic implementation, a response cache.

``anthropic`` is imported by ``dagwright.llm.anthropic`` alone. The package imports none of
its modules itself (PEP 562): ``dagwright.llm.protocol`` and ``dagwright.llm.pricing`` are
plain types, which the CLI reads without paying for a Redis client or circuit breakers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagwright.lazy_exports import lazy_exports

if TYPE_CHECKING:
    import redis

    from dagwright.keys import Keys
    from dagwright.llm.cache import CachingLLM
    from dagwright.llm.protocol import LLM, LLMRequest, LLMResponse
    from dagwright.llm.ratelimit import RateLimitedLLM
    from dagwright.resilience import Breakers
    from dagwright.settings import LLMSettings

_LAZY = {
    "CachingLLM": "dagwright.llm.cache",
    "LLM": "dagwright.llm.protocol",
    "LLMRequest": "dagwright.llm.protocol",
    "LLMResponse": "dagwright.llm.protocol",
    "RateLimitedLLM": "dagwright.llm.ratelimit",
}


__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


def build_llm(
    settings: LLMSettings,
    client: redis.Redis | None,
    keys: Keys,
    breakers: Breakers | None = None,
) -> LLM:
    """The LLM every agent of this process uses (raises LLMNotConfiguredError at once if
    neither an API key nor a base URL is set): behind a circuit breaker per model if given
    ``breakers``, rate-limited per model (``llm_rate_limits``) and cached in Redis if
    enabled and given a client."""
    from dagwright.llm.anthropic import AnthropicLLM  # the SDK loads only where LLMs run
    from dagwright.llm.cache import CachingLLM
    from dagwright.llm.call_limits import CallLimits
    from dagwright.llm.ratelimit import RateLimitedLLM

    llm: LLM = AnthropicLLM(settings, breakers)
    limits = CallLimits.of(settings)
    if settings.rate_limits and client is not None:  # inside the cache: a hit is free
        llm = RateLimitedLLM(
            llm,
            client,
            keys,
            limits=settings.rate_limits,
            window_s=settings.rate_window_s,
            max_wait_s=settings.rate_max_wait_s,
            # A live call may stream until its deadline, each attempt (a dead caller's
            # reservation frees itself then).
            hold_s=settings.idle_timeout_s * settings.max_attempts,
            hold_for=lambda request: limits.deadline_s(request.max_tokens) * settings.max_attempts,
        )
    if settings.cache_enabled and client is not None:
        llm = CachingLLM(llm, client, keys, ttl_s=settings.cache_ttl_s)
    return llm


__all__ = ["LLM", "CachingLLM", "LLMRequest", "LLMResponse", "RateLimitedLLM", "build_llm"]
