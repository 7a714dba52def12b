"""A response cache in Redis, for the requests that opt in (``LLMRequest.response_cache``).

Opt-in, not inferred from ``temperature == 0``: newer models take no temperature at all
and are not deterministic anyway, so whether an identical request may get the earlier
answer is the caller's choice (an agent type's ``response_cache``, or the deployment's
``llm_cache_enabled``). The key is the whole request as the model would read it (model,
system, tools, messages, max_tokens, thinking, effort, temperature), not how it is
delivered (prompt-cache breakpoints, ``llm/prompt_caching.py``). A hit costs nothing: its
usage is zero tokens, zero calls.
"""

from __future__ import annotations

import redis

from dagwright.keys import Keys
from dagwright.llm.protocol import LLM, LLMRequest, LLMResponse
from dagwright.models import Usage


class CachingLLM:
    def __init__(self, inner: LLM, client: redis.Redis, keys: Keys, *, ttl_s: int) -> None:
        self.inner = inner
        self.client = client
        self.keys = keys
        self.ttl_s = ttl_s

    def complete(self, request: LLMRequest) -> LLMResponse:
        if not request.response_cache:
            return self.inner.complete(request)
        key = self.keys.llm_cache(request.digest())
        cached = self.client.get(key)
        if cached is not None:
            hit = LLMResponse.model_validate_json(cached)
            return hit.model_copy(update={"cached": True, "usage": Usage(), "latency_s": 0.0})
        response = self.inner.complete(request)
        self.client.set(key, response.model_dump_json(), ex=self.ttl_s)
        return response
