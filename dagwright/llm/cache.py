"""A response cache in Redis for deterministic requests (temperature 0).

Only then is a cached answer the answer the model would give again; any other request
goes to the model. A hit costs nothing, so its usage is zero tokens, zero calls.
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
        if request.temperature != 0:
            return self.inner.complete(request)
        key = self.keys.llm_cache(request.digest())
        cached = self.client.get(key)
        if cached is not None:
            hit = LLMResponse.model_validate_json(cached)
            return hit.model_copy(update={"cached": True, "usage": Usage(), "latency_s": 0.0})
        response = self.inner.complete(request)
        self.client.set(key, response.model_dump_json(), ex=self.ttl_s)
        return response
