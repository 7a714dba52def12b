"""The published price table of the Claude models, and the cost of an LLM call from it
(with what ``Settings.model_prices`` adds or overrides, ``llm/model_ids.price_of``).

A call to a model missing from the table is not free: its tokens are counted as
``unpriced_tokens`` and every view of the cost says "unknown" (``Usage.cost_words``).
Server-side web searches are billed per 1,000 whatever the model, so their cost is known
even when the tokens' is not; web fetches cost only the tokens of what they read.

Pricing also weighs the call's prompt-cache tokens as billed (``cache_discount_tokens``):
token budgets count a cache read as the fraction of an input token it costs.
"""

from __future__ import annotations

from dagwright.models import Usage
from dagwright.settings import ModelPrice

PER_TOKEN = 1 / 1_000_000
# The Message Batches API's discount: half the price of every token, input, output, cache
# reads and writes alike (the batch processing page). Server tool fees are not tokens.
BATCH_PRICE_FACTOR = 0.5
PER_SEARCH = 1 / 1_000
WEB_SEARCH_USD_PER_1K = 10.0  # the published price; settings.llm.web_search_usd_per_1k
# An unpriced model's cache reads and writes weigh as the published multiples of input.
PUBLISHED_MULTIPLES = ModelPrice(input=1.0, output=1.0)


def _price(
    input: float, output: float, cache_read: float | None = None, **writes: float
) -> ModelPrice:
    return ModelPrice(input=input, output=output, cache_read=cache_read, **writes)


# Published list prices (platform.claude.com/docs/en/about-claude/pricing, November 2026),
# one row per model family: dated ids (``claude-opus-4-5-20251101``) and ``-latest``
# aliases are priced as their family (dagwright/llm/model_ids.py). A test checks that
# every model id of the installed anthropic SDK has a row. Settings add to it or override
# rows: DAGWRIGHT_MODEL_PRICES='{"model-id": {"input": 2, "output": 10}}' or dagwright.toml
# (``Settings.model_prices`` holds only those; ``price_of`` falls back to this table).
DEFAULT_MODEL_PRICES: dict[str, ModelPrice] = {
    "claude-fable-5-2": _price(8, 40, 0.2, cache_write=10, cache_write_1h=16),
    "claude-mythos-5-2": _price(8, 40, 0.2, cache_write=10, cache_write_1h=16),
    "claude-fable-5-1": _price(10, 50, 0.25),  # reads at 0.025x input
    "claude-mythos-5-1": _price(10, 50, 0.25),
    "claude-fable-5": _price(10, 50),
    "claude-mythos-5": _price(10, 50),
    # Not listed on the pricing page (research preview): Fable 5 was announced at "less
    # than half" its price; $25 / $125 is taken so that a budget is not undercounted.
    "claude-mythos-preview": _price(25, 125),
    "claude-opus-5-5": _price(4, 20, 0.2),  # reads at 0.05x input
    "claude-opus-5": _price(5, 25),
    "claude-opus-4-8": _price(5, 25),
    "claude-opus-4-7": _price(5, 25),
    "claude-opus-4-6": _price(5, 25),
    "claude-opus-4-5": _price(5, 25),
    "claude-opus-4-1": _price(15, 75),
    "claude-opus-4": _price(15, 75),
    "claude-sonnet-5-5": _price(2, 10, 0.1),  # reads at 0.05x input (the migration guide)
    "claude-sonnet-5": _price(2, 10),
    "claude-sonnet-4-6": _price(3, 15),
    "claude-sonnet-4-5": _price(3, 15),
    "claude-sonnet-4": _price(3, 15),
    # Haiku 5.5 is priced in two bands; these are of prompts up to 100,000 tokens (longer
    # ones cost 5x): a node that reads more than that is undercounted.
    "claude-haiku-5-5": _price(0.1, 0.5, 0.01),
    "claude-haiku-4-5": _price(1, 5),
}


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
    discount = cache_discount(usage, price or PUBLISHED_MULTIPLES)
    if price is None:
        return usage.model_copy(
            update={
                "cost_usd": searches,
                "unpriced_tokens": usage.total_tokens,
                "cache_discount_tokens": discount,
            }
        )
    one_hour, five_minutes = cache_writes(usage)
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
    return usage.model_copy(
        update={
            "cost_usd": round(cost, 9) + searches,
            "unpriced_tokens": 0,
            "cache_discount_tokens": discount,
        }
    )


def cache_writes(usage: Usage) -> tuple[int, int]:
    """The call's cache writes: (1-hour, 5-minute)."""
    one_hour = min(usage.cache_creation_1h_input_tokens, usage.cache_creation_input_tokens)
    return one_hour, usage.cache_creation_input_tokens - one_hour


def cache_discount(usage: Usage, price: ModelPrice) -> int:
    """How many fresh-input tokens fewer the call's cache reads and writes were billed as
    (``Usage.cache_discount_tokens``): each weighted by its rate over the input rate. A
    model with no price is weighted by the published multiples (0.1, 1.25, 2)."""
    if price.input <= 0:
        return 0
    one_hour, five_minutes = cache_writes(usage)
    billed = (
        usage.cache_read_input_tokens * price.cache_read_rate
        + five_minutes * price.cache_write_5m_rate
        + one_hour * price.cache_write_1h_rate
    ) / price.input
    return round(usage.cache_read_input_tokens + usage.cache_creation_input_tokens - billed)
