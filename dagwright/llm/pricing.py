"""The cost of an LLM call, from the per-model price table in settings.

A call to a model missing from the table is not free: its tokens are counted as
``unpriced_tokens`` and every view of the cost says "unknown" (``Usage.cost_words``).
"""

from __future__ import annotations

from dagwright.models import Usage
from dagwright.settings import ModelPrice

PER_TOKEN = 1 / 1_000_000


def priced(usage: Usage, price: ModelPrice | None) -> Usage:
    """``usage`` with its cost in USD; unpriced (cost unknown) if ``price`` is None."""
    if price is None:
        return usage.model_copy(update={"cost_usd": 0.0, "unpriced_tokens": usage.total_tokens})
    one_hour = min(usage.cache_creation_1h_input_tokens, usage.cache_creation_input_tokens)
    five_minutes = usage.cache_creation_input_tokens - one_hour
    cost = PER_TOKEN * (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_input_tokens * price.cache_read_rate
        + five_minutes * price.cache_write_5m_rate
        + one_hour * price.cache_write_1h_rate
    )
    return usage.model_copy(update={"cost_usd": round(cost, 9), "unpriced_tokens": 0})
