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
    from dagwright.llm.batches import MessageBatches
    from dagwright.llm.input_tokens import InputTokenEstimator
    from dagwright.llm.protocol import LLM, LLMRequest, LLMResponse
    from dagwright.llm.ratelimit import RateLimitedLLM
    from dagwright.llm.response_cache import CachingLLM
    from dagwright.resilience import Breakers
    from dagwright.settings import LLMSettings

_LAZY = {
    "CachingLLM": "dagwright.llm.response_cache",
    "InputTokenEstimator": "dagwright.llm.input_tokens",
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
    ``breakers``, rate-limited per model (``llm_rate_limits``) and, given a client, with a
    response cache in Redis for the requests that opt in."""
    from dagwright.llm.anthropic import AnthropicLLM  # the SDK loads only where LLMs run
    from dagwright.llm.call_limits import CallLimits
    from dagwright.llm.ratelimit import RateLimitedLLM
    from dagwright.llm.response_cache import CachingLLM

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
    if client is not None:  # answers only the requests that opt in (response_cache)
        llm = CachingLLM(llm, client, keys, ttl_s=settings.cache_ttl_s)
    return llm


def build_batches(settings: LLMSettings, breakers: Breakers | None = None) -> MessageBatches:
    """The Message Batches API of this process's endpoint (LLMNotConfiguredError at once
    if none is configured), with the LLM layer's retries and price table."""
    from dagwright.llm.anthropic import AnthropicLLM

    return AnthropicLLM(settings, breakers).batches


def build_input_estimator(settings: LLMSettings) -> InputTokenEstimator:
    """The estimator of requests' input tokens of this process: the API's ``count_tokens``
    for static prefixes where an endpoint is configured, characters otherwise."""
    from dagwright.errors import LLMNotConfiguredError
    from dagwright.llm.anthropic import AnthropicLLM
    from dagwright.llm.input_tokens import InputTokenEstimator

    try:
        return InputTokenEstimator(AnthropicLLM(settings))
    except LLMNotConfiguredError:
        return InputTokenEstimator(None)


__all__ = [
    "LLM",
    "CachingLLM",
    "InputTokenEstimator",
    "LLMRequest",
    "LLMResponse",
    "RateLimitedLLM",
    "build_batches",
    "build_input_estimator",
    "build_llm",
]
