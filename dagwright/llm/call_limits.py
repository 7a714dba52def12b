"""How long one LLM call may take, and what its failures say about the endpoint.

Pure functions, without the SDK (``llm/anthropic.py`` applies them):

- A streamed call has three bounds instead of one timeout: a short connect timeout, an
  idle timeout between two stream events (a stalled stream is an outage), and an overall
  deadline that grows with ``max_tokens`` (a generation slower than
  ``min_tokens_per_s`` is given up, but is not an outage). One total timeout (rejected:
  the 120 s it used to be) cut off long generations that were making progress, and
  counted them against the model's breaker.
- A connection that cannot be opened at all (refused, no such host) names its cause in
  one line: the endpoint is misconfigured or down, and the node says so.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterator
from dataclasses import dataclass

from dagwright.settings import LLMSettings

# The stream's own bounds are ours (idle, deadline); httpx's write and pool timeouts only
# guard against a wedged socket or connection pool.
WRITE_TIMEOUT_S = 30.0
POOL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class CallLimits:
    """The time bounds of one streamed LLM call."""

    connect_s: float
    idle_s: float
    min_tokens_per_s: float

    @classmethod
    def of(cls, settings: LLMSettings) -> CallLimits:
        return cls(settings.connect_timeout_s, settings.idle_timeout_s, settings.min_tokens_per_s)

    def deadline_s(self, max_tokens: int) -> float:
        """Longest a call asking for ``max_tokens`` may stream, from its first byte sent."""
        return self.idle_s + max_tokens / self.min_tokens_per_s


def unreachable_cause(exc: BaseException) -> str | None:
    """``"connection refused"`` or ``"no such host"`` if ``exc`` (or what caused it)
    says nothing listens at the endpoint; None for any other failure (a reset, a timeout)."""
    for cause in _causes(exc):
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, socket.gaierror):
            return "no such host"
        if isinstance(cause, OSError) and cause.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
            return "no route to host"
    return None


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__
