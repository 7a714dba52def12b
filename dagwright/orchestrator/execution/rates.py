"""Rate limits per function or worker type, over every worker: at most N node starts per
second, minute or hour (``@dagwright.function(rate_limit="5/s")``,
``DAGWRIGHT_RATE_LIMITS='{"type:researcher": "10/m"}'``, which wins over a function's own).

A claimed node takes a start of each of its rates in one script (``lua/rates_take.lua``,
a sliding window on the server's clock), before it asks for its concurrency slots. Over
a rate, it is *parked*: RETRY_WAIT until the window has room, its attempt given back and
its worker slot freed (retry.lua's waits, kind ``rate``), shown "waiting for rate limit
function:fetch_prices (5/s) until …". The reconciler queues it again when due.

Bounded: a node's waits for rates add up, from its first, and past
``rate_limit_max_wait_s`` the attempt fails with RateLimitWaitExpiredError (retryable:
its retry policy decides). A backlog over a rate drains at that rate, so a node may
otherwise wait as long as the backlog ahead of it; the bound says when that is too long.

Rejected: Celery's ``rate_limit`` (per worker process, not shared); a token bucket or
GCRA (a burst after an idle period lets up to 2N starts into one period: the promise
here is N per any period); holding the message until the rate has room (a worker slot
held for nothing, and the message invisible to other workers).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from dagwright.models import Node
from dagwright.orchestrator.runtime import Runtime
from dagwright.rates import Rate
from dagwright.redis_scripts import load_script, named_reply

PACKAGE = "dagwright.orchestrator.execution"


@dataclass(frozen=True)
class NamedRate:
    """One rate limit a node is under: ``function:fetch_prices`` at ``5/s``."""

    subject: str
    rate: Rate

    def __str__(self) -> str:
        return f"{self.subject} ({self.rate})"


@dataclass(frozen=True)
class RateWait:
    """A node over ``limit``: how long until it has room."""

    limit: NamedRate
    wait_s: float


def node_rates(runtime: Runtime, node: Node) -> list[NamedRate]:
    """The rate limits a node starts under: its function's, its worker type's."""
    rates = runtime.settings.throttles.rate_limits
    found: list[NamedRate] = []
    if node.function is not None:
        subject = f"function:{node.function}"
        registered = runtime.registry.functions.get(node.function)
        text = rates.get(subject) or (registered.rate_limit if registered else None)
        if text:
            found.append(NamedRate(subject, Rate.parse(text)))
    type_rate = rates.get(f"type:{node.type}")
    if type_rate:
        found.append(NamedRate(f"type:{node.type}", Rate.parse(type_rate)))
    return found


class RateWindows:
    """The rate limits' script for one Redis client."""

    def __init__(self, runtime: Runtime) -> None:
        self.keys = runtime.keys
        self._take = load_script(runtime.client, PACKAGE, "rates_take")

    def take(self, rates: list[NamedRate], member: str) -> RateWait | None:
        """A start of every rate (None), or of none: the rate the node waits for, and
        how long (with a little jitter, so that the waiters of one window do not all
        come back at the same millisecond)."""
        keys = [self.keys.rate_window(limit.subject) for limit in rates]
        args: list[Any] = [member]
        for limit in rates:
            args += [limit.rate.count, limit.rate.period_s * 1000]
        fields = named_reply(self._take(keys=keys, args=args))
        if fields["status"] == "ok":
            return None
        limit = rates[int(fields["rate"]) - 1]
        spacing_s = limit.rate.period_s / limit.rate.count
        return RateWait(limit, int(fields["wait_ms"]) / 1000 + random.uniform(0, spacing_s))
