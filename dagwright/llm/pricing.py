"""The cost of an LLM call, from the per-model price table in settings.

A call to a model missing from the table is not free: its tokens are counted as
``unpriced_tokens`` and every view of the cost says "unknown" (``Usage.cost_words``).
Server-side web searches are billed per 1,000 whatever the model, so their cost is known
even when the tokens' is not; web fetches cost only the tokens of what they read.
"""

from __future__ import annotations

from dagwright.models import Usage
from dagwright.settings import ModelPrice

PER_TOKEN = 1 / 1_000_000
# The Message Batches API's discount: half the price of every token, input, output, cache
# reads and writes alike (the batch processing page). Server tool fees are not tokens.
BATCH_PRICE_FACTOR = 0.5
PER_SEARCH = 1 / 1_000
WEB_SEARCH_USD_PER_1K = 10.0  # the published price; settings.web_search_usd_per_1k


def priced(
    usage: Usage,
    price: ModelPrice | None,
    search_usd_per_1k: float = WEB_SEARCH_USD_PER_1K,
    *,
    batch: bool = False,
) -> Usage:
    """``usage`` with its cost in USD; its tokens unpriced (cost unknown) if ``price`` is
    None. Web searches cost ``search_usd_per_1k`` per 1,000 either way. A call answered
    in a Message Batch (``batch``) pays ``BATCH_PRICE_FACTOR`` of its tokens' price."""
    searches = round(usage.web_search_requests * search_usd_per_1k * PER_SEARCH, 9)
    if price is None:
        return usage.model_copy(
            update={"cost_usd": searches, "unpriced_tokens": usage.total_tokens}
        )
    one_hour = min(usage.cache_creation_1h_input_tokens, usage.cache_creation_input_tokens)
    five_minutes = usage.cache_creation_input_tokens - one_hour
    cost = (
        PER_TOKEN
        * (
            usage.input_tokens * price.input
            + usage.output_tokens * price.output
            + usage.cache_read_input_tokens * price.cache_read_rate
            + five_minutes * price.cache_write_5m_rate
            + one_hour * price.cache_write_1h_rate
        )
        * (BATCH_PRICE_FACTOR if batch else 1.0)
    )
    return usage.model_copy(update={"cost_usd": round(cost, 9) + searches, "unpriced_tokens": 0})
