"""LLM rate limits per model, global across workers: requests and tokens per window.

One sliding window per model in Redis (``keys.llm_rate``). Before a call, one script
reserves a request and the call's estimated tokens (the input at ~4 characters a token,
plus ``max_tokens`` of output); when the answer comes, the reservation is corrected to
the real usage. A reservation counts until one window after its call returned (while in
flight, as if it returned ``hold_s`` later, so a caller that died frees it in the end):
whatever window of time one looks at, the calls made in it fit the limit.

A caller without room waits its turn: it takes a ticket (a waiters zset scored by when it
first asked), and only the oldest ticket may reserve, so a burst of small calls cannot
starve a big one. A waiter that stops asking (its process died) loses its place after
``WAITER_TTL_S``. After ``max_wait_s`` the call gives up with ``LLMRateLimitedError``
(retryable: its node is retried later). A call bigger than the whole token limit could
never fit: ``LLMCallTooLargeError`` (permanent).

Rejected: a token bucket (it needs a refill rate and says nothing about "tokens in the
last minute", the provider's wording); counting only after the call (a burst of calls
started together would all pass before any is counted).

All retries of one call (the LLM layer's, on 429/5xx) count as one request.
"""

from __future__ import annotations

import json
import logging
import time
import uuid

import redis

from dagwright.errors import LLMCallTooLargeError, LLMRateLimitedError
from dagwright.keys import Keys
from dagwright.llm.protocol import LLM, LLMRequest, LLMResponse, rough_tokens
from dagwright.settings import LLMRateLimit

log = logging.getLogger(__name__)

MIN_POLL_S = 0.02
MAX_POLL_S = 0.5
WAITER_TTL_S = 3.0  # a waiter that has not asked again for this long has died
TOTAL = "=total"  # the tokens hash's running sum (reservation ids are hex)

# KEYS: calls (zset reservation -> ms after which it counts for one more window), tokens
# (hash reservation -> tokens, and TOTAL), waiters (zset ticket -> ms first asked), alive
# (zset ticket -> ms its place lapses). ARGV: ticket, window ms, requests per window (0:
# none), tokens per window (0: none), tokens estimate, hold ms, waiter ttl ms.
# Returns {'ok'} or {'wait', tickets ahead, ms to wait before asking again}.
RESERVE = """
local calls, tokens, waiters, alive = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local ticket, window = ARGV[1], tonumber(ARGV[2])
local max_calls, max_tokens, estimate = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
for _, id in ipairs(redis.call('ZRANGEBYSCORE', calls, '-inf', now - window)) do
  redis.call('HINCRBY', tokens, '=total', -tonumber(redis.call('HGET', tokens, id) or 0))
  redis.call('HDEL', tokens, id)
end
redis.call('ZREMRANGEBYSCORE', calls, '-inf', now - window)
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', alive, '-inf', now)) do
  redis.call('ZREM', waiters, gone)
end
redis.call('ZREMRANGEBYSCORE', alive, '-inf', now)
redis.call('ZADD', waiters, 'NX', now, ticket)
redis.call('ZADD', alive, now + tonumber(ARGV[7]), ticket)
local ahead = redis.call('ZRANK', waiters, ticket)
if ahead > 0 then return {'wait', ahead, 50 * ahead} end
local total = tonumber(redis.call('HGET', tokens, '=total') or 0)
if (max_calls > 0 and redis.call('ZCARD', calls) + 1 > max_calls)
    or (max_tokens > 0 and total + estimate > max_tokens) then
  local oldest = redis.call('ZRANGE', calls, 0, 0, 'WITHSCORES')
  local wait = oldest[2] and (tonumber(oldest[2]) + window - now) or 1
  return {'wait', 0, math.max(wait, 1)}
end
redis.call('ZREM', waiters, ticket)
redis.call('ZREM', alive, ticket)
redis.call('ZADD', calls, now + tonumber(ARGV[6]), ticket)
redis.call('HSET', tokens, ticket, estimate)
redis.call('HINCRBY', tokens, '=total', estimate)
return {'ok'}
"""

# The call returned: it counts its real tokens (ARGV[2]) for one window from now. Same
# KEYS; ARGV[1] the reservation.
SETTLE = """
local calls, tokens, id, used = KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local reserved = tonumber(redis.call('HGET', tokens, id) or 0)
redis.call('ZADD', calls, now, id)
redis.call('HSET', tokens, id, used)
redis.call('HINCRBY', tokens, '=total', used - reserved)
return 1
"""


def estimated_tokens(request: LLMRequest) -> int:
    """What a call may use at most, roughly: its input, and all of ``max_tokens`` out."""
    sent = request.system + json.dumps(request.messages)
    if request.tools:
        sent += json.dumps(request.tools)
    return rough_tokens(sent) + request.max_tokens  # corrected after the call


class RateLimitedLLM:
    """An LLM whose calls wait for room in their model's rate limits (``limits`` by
    model id, ``"*"`` for every model not listed, each model its own window)."""

    def __init__(
        self,
        inner: LLM,
        client: redis.Redis,
        keys: Keys,
        *,
        limits: dict[str, LLMRateLimit],
        window_s: float,
        max_wait_s: float,
        hold_s: float,
    ) -> None:
        self.inner = inner
        self.client = client
        self.keys = keys
        self.limits = limits
        self.window_ms = int(window_s * 1000)
        self.max_wait_s = max_wait_s
        self.hold_ms = int(hold_s * 1000)
        self._reserve = client.register_script(RESERVE)
        self._settle = client.register_script(SETTLE)

    def complete(self, request: LLMRequest) -> LLMResponse:
        limit = self.limits.get(request.model) or self.limits.get("*")
        if limit is None:
            return self.inner.complete(request)
        estimate = estimated_tokens(request)
        self._check_size(request, limit, estimate)
        keys = self._keys(request.model)
        ticket = self._wait_for_room(request.model, keys, limit, estimate)
        try:
            response = self.inner.complete(request)
        except BaseException:
            self._correct(keys, ticket, estimate)  # it may have used that much
            raise
        self._correct(keys, ticket, response.usage.total_tokens)
        return response

    def _correct(self, keys: list[str], ticket: str, tokens: int) -> None:
        try:
            self._settle(keys=keys[:2], args=[ticket, tokens])
        except redis.RedisError:  # the estimate stays reserved: safe, and the answer is kept
            log.warning("correcting an LLM rate reservation failed", exc_info=True)

    def _keys(self, model: str) -> list[str]:
        return [self.keys.llm_rate(model, name) for name in ("calls", "tokens", "waiters", "alive")]

    def _check_size(self, request: LLMRequest, limit: LLMRateLimit, estimate: int) -> None:
        if limit.tokens_per_minute is not None and estimate > limit.tokens_per_minute:
            raise LLMCallTooLargeError(
                f"an LLM call to {request.model} could use {estimate} tokens (its input, "
                f"estimated, and max_tokens {request.max_tokens}), more than its whole limit "
                f"of {limit.tokens_per_minute} tokens per window (DAGWRIGHT_LLM_RATE_LIMITS): "
                "it could never be made; raise the limit or lower the agent's max_tokens"
            )

    def _wait_for_room(
        self, model: str, keys: list[str], limit: LLMRateLimit, estimate: int
    ) -> str:
        """Reserve room for the call, waiting in turn; its reservation id."""
        ticket = uuid.uuid4().hex
        args = [
            ticket,
            self.window_ms,
            limit.requests_per_minute or 0,
            limit.tokens_per_minute or 0,
            estimate,
            self.hold_ms,
            int(WAITER_TTL_S * 1000),
        ]
        started = time.monotonic()
        logged = False
        while True:
            reply = self._reserve(keys=keys, args=args)
            if reply[0] == "ok":
                return ticket
            waited = time.monotonic() - started
            if waited >= self.max_wait_s:
                self.client.zrem(keys[2], ticket)
                raise LLMRateLimitedError(
                    f"no room in the rate limit of {model} after {waited:.1f}s "
                    f"({reply[1]} call(s) waiting before this one)",
                    retry_after_s=int(reply[2]) / 1000,
                )
            if not logged:
                logged = True
                log.info("an LLM call to %s waits for its rate limit (%s ahead)", model, reply[1])
            delay = min(max(int(reply[2]) / 1000, MIN_POLL_S), MAX_POLL_S)
            time.sleep(min(delay, self.max_wait_s - waited))
