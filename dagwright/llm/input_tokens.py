"""Input tokens of a Messages API request, before it is sent (budgets, rate limits).

Everything sent is input: the system prompt, the tool definitions and the messages. The
static prefix of an agent's calls (its type's system prompt and tools: often more than its
first message, and the same on every turn) is counted once by the API's ``count_tokens``
endpoint and remembered; the run's system block (``LLMRequest.run_system``: another for
every run) and the messages, which change every turn, are estimated from their characters
(``rough_tokens``). Where the endpoint is unreachable (an older proxy, a fake)
the whole request is estimated from its characters, and the endpoint is asked again only
after ``RETRY_COUNT_AFTER_S``.

Rejected: counting every request with the endpoint (one more round trip per call, and a
rate limit of its own); estimating only the messages (what budgets did before: a
planner's first call was estimated at 799 tokens with 1,004 tokens of tools left out).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from dagwright.errors import DagwrightError
from dagwright.llm.protocol import LLMRequest, rough_tokens

log = logging.getLogger(__name__)

RETRY_COUNT_AFTER_S = 300.0
MAX_REMEMBERED_PREFIXES = 256
# The endpoint wants one message: the prefix is counted with this one, a token or two
# more than the prefix alone (an estimate that errs high is the safe side of a budget).
PLACEHOLDER_MESSAGES = [{"role": "user", "content": "."}]


class TokenCounter(Protocol):
    """The ``count_tokens`` endpoint: the input tokens of ``request`` as the API counts
    them; raises a DagwrightError if it cannot say."""

    def count_input_tokens(self, request: LLMRequest) -> int: ...


def rough_request_tokens(request: LLMRequest) -> int:
    """The input tokens of the whole request from its characters: system, tools, messages."""
    return (
        sum(rough_tokens(text) for text in request.system_texts())
        + rough_tokens(json.dumps(request.tools))
        + rough_messages_tokens(request)
    )


def rough_messages_tokens(request: LLMRequest) -> int:
    return rough_tokens(json.dumps(request.messages))


def prefix_key(request: LLMRequest) -> str:
    """What a request's static prefix is remembered by: model, system prompt and tools."""
    prefix = json.dumps([request.model, request.system, request.tools], sort_keys=True)
    return hashlib.sha256(prefix.encode()).hexdigest()


class InputTokenEstimator:
    """Input tokens of requests: the static prefix counted by ``counter`` (None: never)
    once per prefix, the messages from their characters. Thread-safe; one per process."""

    def __init__(
        self, counter: TokenCounter | None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._counter = counter
        self._clock = clock
        self._prefixes: dict[str, int] = {}
        self._unreachable_until = 0.0
        self._lock = threading.Lock()

    def estimate(self, request: LLMRequest) -> int:
        prefix = self._prefix_tokens(request)
        if prefix is None:
            return rough_request_tokens(request)
        return prefix + rough_tokens(request.run_system or "") + rough_messages_tokens(request)

    def _prefix_tokens(self, request: LLMRequest) -> int | None:
        key = prefix_key(request)
        with self._lock:
            if key in self._prefixes:
                return self._prefixes[key]
            if self._counter is None or self._clock() < self._unreachable_until:
                return None
        counted = self._count_prefix(request)
        with self._lock:
            if counted is None:
                self._unreachable_until = self._clock() + RETRY_COUNT_AFTER_S
            elif len(self._prefixes) < MAX_REMEMBERED_PREFIXES:
                self._prefixes[key] = counted
        return counted

    def _count_prefix(self, request: LLMRequest) -> int | None:
        assert self._counter is not None
        # The run's system block is left out: it changes from run to run, and a prefix
        # counted per run would fill the table (it is estimated from its characters).
        prefix_only = request.model_copy(
            update={"messages": PLACEHOLDER_MESSAGES, "run_system": None}
        )
        try:
            return self._counter.count_input_tokens(prefix_only)
        except DagwrightError as exc:
            log.info("count_tokens is unavailable (%s): estimating from characters", exc)
            return None
