"""The cost of an LLM call, from the per-model price table in settings."""

from __future__ import annotations

from dagwright.models import Usage
from dagwright.settings import ModelPrice

PER_TOKEN = 1 / 1_000_000


def priced(usage: Usage, price: ModelPrice | None) -> Usage:
    """``usage`` with its cost in USD (0 for a model missing from the price table)."""
    if price is None:
        return usage
    cost = PER_TOKEN * (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_input_tokens * price.cache_read
        + usage.cache_creation_input_tokens * price.cache_write
    )
    return usage.model_copy(update={"cost_usd": round(cost, 9)})
