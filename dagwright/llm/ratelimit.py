"""LLM rate limits per model, global across workers: requests and tokens per window.

One sliding window per model in Redis (``keys.llm_rate``). Before a call, one script
reserves a request and the call's estimated tokens (the input at ~4 characters a token,
plus ``max_tokens`` of output); when the answer comes, the reservation is corrected to
the real usage. A reservation counts until one window after its call returned (while in
flight, as if it returned ``hold_s`` later — or ``hold_for(request)``, the longest the
call may take, when given — so a caller that died frees it in the end):
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

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from dagwright.errors import LLMCallTooLargeError, LLMRateLimitedError
from dagwright.keys import Keys
from dagwright.llm.input_tokens import rough_request_tokens
from dagwright.llm.protocol import LLM, LLMRequest, LLMResponse
from dagwright.redis_scripts import load_script, named_reply
from dagwright.settings import LLMRateLimit

log = logging.getLogger(__name__)

MIN_POLL_S = 0.02
MAX_POLL_S = 0.5
WAITER_TTL_S = 3.0  # a waiter that has not asked again for this long has died
TOTAL = "=total"  # the tokens hash's running sum (reservation ids are hex)


@dataclass(frozen=True)
class RoomAnswer:
    """The answer of ``lua/ratelimit_reserve.lua``: room was reserved (``granted``), or
    the call waits: ``ahead`` calls wait before it, ask again in ``wait_ms``."""

    granted: bool
    ahead: int
    wait_ms: int

    @classmethod
    def from_reply(cls, reply: Any) -> RoomAnswer:
        fields = named_reply(reply)
        return cls(
            granted=fields["status"] == "ok",
            ahead=int(fields["ahead"]),
            wait_ms=int(fields["wait_ms"]),
        )


def estimated_tokens(request: LLMRequest) -> int:
    """What a call may use at most, roughly: its input, and all of ``max_tokens`` out."""
    return rough_request_tokens(request) + request.max_tokens  # corrected after the call


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
        hold_for: Callable[[LLMRequest], float] | None = None,
    ) -> None:
        self.inner = inner
        self.client = client
        self.keys = keys
        self.limits = limits
        self.window_ms = int(window_s * 1000)
        self.max_wait_s = max_wait_s
        self.hold_ms = int(hold_s * 1000)
        self.hold_for = hold_for
        self._reserve = load_script(client, "dagwright.llm", "ratelimit_reserve")
        self._settle = load_script(client, "dagwright.llm", "ratelimit_settle")

    def complete(self, request: LLMRequest) -> LLMResponse:
        limit = self.limits.get(request.model) or self.limits.get("*")
        if limit is None:
            return self.inner.complete(request)
        estimate = estimated_tokens(request)
        self._check_size(request, limit, estimate)
        keys = self._keys(request.model)
        hold_ms = int(self.hold_for(request) * 1000) if self.hold_for else self.hold_ms
        ticket = self._wait_for_room(request.model, keys, limit, estimate, hold_ms)
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
        self, model: str, keys: list[str], limit: LLMRateLimit, estimate: int, hold_ms: int
    ) -> str:
        """Reserve room for the call, waiting in turn; its reservation id."""
        ticket = uuid.uuid4().hex
        args = [
            ticket,
            self.window_ms,
            limit.requests_per_minute or 0,
            limit.tokens_per_minute or 0,
            estimate,
            hold_ms,
            int(WAITER_TTL_S * 1000),
        ]
        started = time.monotonic()
        logged = False
        while True:
            answer = RoomAnswer.from_reply(self._reserve(keys=keys, args=args))
            if answer.granted:
                return ticket
            waited = time.monotonic() - started
            if waited >= self.max_wait_s:
                self.client.zrem(keys[2], ticket)
                raise LLMRateLimitedError(
                    f"no room in the rate limit of {model} after {waited:.1f}s "
                    f"({answer.ahead} call(s) waiting before this one)",
                    retry_after_s=answer.wait_ms / 1000,
                )
            if not logged:
                logged = True
                log.info(
                    "an LLM call to %s waits for its rate limit (%s ahead)", model, answer.ahead
                )
            delay = min(max(answer.wait_ms / 1000, MIN_POLL_S), MAX_POLL_S)
            time.sleep(min(delay, self.max_wait_s - waited))
