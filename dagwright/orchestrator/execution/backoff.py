"""Retry delays: a pure function of the policy and the attempt number."""

from __future__ import annotations

import random
from collections.abc import Callable

from dagwright.models import RetryPolicy


def compute_backoff(
    policy: RetryPolicy, attempt: int, rng: Callable[[], float] = random.random
) -> float:
    """Delay in seconds before retrying after failed attempt number ``attempt`` (1-based).

    Exponential (``backoff_s * 2**(attempt-1)``, capped at ``backoff_max_s``) with "equal
    jitter": half the delay is fixed, half random, so retries spread out but never collapse
    to zero.
    """
    delay = min(policy.backoff_max_s, policy.backoff_s * 2 ** max(attempt - 1, 0))
    if not policy.jitter:
        return delay
    return delay / 2 + rng() * delay / 2
