"""Prices of LLM calls: model ids resolved to their family, prompt-cache rates (reads,
5-minute and 1-hour writes), every model the installed SDK knows priced, and a model
missing from the table priced "unknown", never $0."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from dagwright.llm.anthropic import AnthropicLLM, one_hour_cache_writes
from dagwright.llm.model_ids import model_family, price_of, unpriced
from dagwright.llm.pricing import DEFAULT_MODEL_PRICES, priced
from dagwright.llm.protocol import LLMRequest
from dagwright.llm.sdk_models import sdk_model_ids
from dagwright.models import Usage
from dagwright.settings import ModelPrice, Settings
from dagwright.testing import FakeAnthropicServer

# 1 USD per million tokens in, 10 out: a million tokens of each kind are easy to read.
ROUND = ModelPrice(input=1, output=10)
HELLO = [{"role": "user", "content": "Hello."}]
SNAPSHOT = "claude-sonnet-5-20260630"  # a dated id of claude-sonnet-5 (the SDK lists none)


@pytest.mark.parametrize(
    ("model_id", "family"),
    [
        ("claude-opus-4-5-20251101", "claude-opus-4-5"),
        ("claude-sonnet-5-5-20260928", "claude-sonnet-5-5"),
        ("claude-opus-4-5@20251101", "claude-opus-4-5"),  # Vertex spells it with @
        ("claude-sonnet-5-5-latest", "claude-sonnet-5-5"),
        ("claude-opus-5", "claude-opus-5"),
        ("claude-mythos-preview", "claude-mythos-preview"),
    ],
)
def test_a_dated_id_or_an_alias_resolves_to_its_family(model_id: str, family: str) -> None:
    assert model_family(model_id) == family


def test_a_dated_id_is_priced_as_its_family_unless_it_has_its_own_row() -> None:
    prices = {"claude-haiku-5-5": ROUND, "claude-x-1-20990101": ModelPrice(input=7, output=7)}
    assert price_of("claude-haiku-5-5-20261015", prices) == ROUND
    assert price_of("claude-haiku-5-5-latest", prices) == ROUND
    assert price_of("claude-x-1-20990101", prices) == ModelPrice(input=7, output=7)
    assert price_of("claude-unknown-9", prices) is None
    assert unpriced({"claude-unknown-9", "claude-haiku-5-5-20261015"}, prices) == [
        "claude-unknown-9"
    ]


def test_every_model_the_sdk_knows_has_a_price() -> None:
    ids = sdk_model_ids()
    assert "claude-sonnet-5-5" in ids and len(ids) > 5
    assert unpriced(set(ids), DEFAULT_MODEL_PRICES) == []
    for model_id in ids:
        price = price_of(model_id, DEFAULT_MODEL_PRICES)
        assert price is not None and price.input > 0 and price.output > price.input


def test_cache_reads_and_writes_are_priced_at_their_own_rates() -> None:
    million = 1_000_000
    # Defaults: reads 0.1x input, 5-minute writes 1.25x, 1-hour writes 2x.
    assert priced(Usage(cache_read_input_tokens=million), ROUND).cost_usd == pytest.approx(0.1)
    five_minutes = Usage(cache_creation_input_tokens=million)
    assert priced(five_minutes, ROUND).cost_usd == pytest.approx(1.25)
    one_hour = Usage(cache_creation_input_tokens=million, cache_creation_1h_input_tokens=million)
    assert priced(one_hour, ROUND).cost_usd == pytest.approx(2.0)
    mixed = Usage(
        input_tokens=million,
        output_tokens=million,
        cache_read_input_tokens=million,
        cache_creation_input_tokens=3 * million,
        cache_creation_1h_input_tokens=million,
    )
    assert priced(mixed, ROUND).cost_usd == pytest.approx(1 + 10 + 0.1 + 2 * 1.25 + 2)


def test_a_models_own_cache_rates_replace_the_multiples() -> None:
    opus = DEFAULT_MODEL_PRICES["claude-opus-5-5"]  # reads at $0.20, not 0.1x of $4
    usage = Usage(cache_read_input_tokens=1_000_000)
    assert priced(usage, opus).cost_usd == pytest.approx(0.2)
    fable = DEFAULT_MODEL_PRICES["claude-fable-5-2"]  # writes at $10 and $16, not 1.25x/2x
    writes = Usage(cache_creation_input_tokens=2_000_000, cache_creation_1h_input_tokens=1_000_000)
    assert priced(writes, fable).cost_usd == pytest.approx(10 + 16)


def test_the_one_hour_writes_are_read_from_the_usages_breakdown() -> None:
    breakdown = SimpleNamespace(ephemeral_5m_input_tokens=10, ephemeral_1h_input_tokens=30)
    assert one_hour_cache_writes(SimpleNamespace(cache_creation=breakdown)) == 30
    assert one_hour_cache_writes(SimpleNamespace(cache_creation=None)) == 0
    assert one_hour_cache_writes(SimpleNamespace()) == 0


def test_an_unpriced_model_costs_unknown_never_zero() -> None:
    call = priced(Usage(input_tokens=100, output_tokens=20, llm_calls=1), None)
    assert call.unpriced_tokens == 120 and not call.cost_is_known
    assert call.cost_words() == "unknown"
    partly = priced(Usage(input_tokens=1_000_000), ROUND).plus(call)
    assert partly.cost_words() == "≥ $1.00 + unpriced"
    assert priced(Usage(input_tokens=1_000_000), ROUND).cost_words() == "$1.00"


def test_prices_given_in_settings_are_added_to_the_published_ones() -> None:
    cheaper = ModelPrice(input=0.05, output=0.25)
    given = Settings(model_prices={"claude-x-1": ModelPrice(input=2, output=10)})
    overriding = Settings(model_prices={"claude-haiku-5-5": cheaper})
    assert set(given.llm.model_prices) == {"claude-x-1"}  # settings hold what was given
    price = price_of("claude-x-1-20990101", given.llm.model_prices)
    assert price is not None and price.input == 2
    published = DEFAULT_MODEL_PRICES["claude-haiku-5-5"]
    assert price_of("claude-haiku-5-5", given.llm.model_prices) == published
    assert price_of("claude-haiku-5-5-latest", overriding.llm.model_prices) == cheaper
    assert price_of("claude-opus-4-5", overriding.llm.model_prices) is not None


def answer(model: str) -> dict[str, Any]:
    usage = {"input_tokens": 1_000_000, "output_tokens": 0}
    return {"reply": {"model": model, "content": [{"type": "text", "text": "ok"}], "usage": usage}}


def test_a_call_is_priced_as_requested_resolved_to_its_family(
    settings: Settings, fake_llm: FakeAnthropicServer
) -> None:
    llm = AnthropicLLM(settings.llm)
    # The answer names a snapshot: priced as the family asked for (sonnet 5, $2 in).
    fake_llm.add(answer("claude-sonnet-5-20260630"))
    dated = llm.complete(LLMRequest(model="claude-sonnet-5", system="s", messages=HELLO))
    assert dated.usage.cost_usd == pytest.approx(2.0) and dated.usage.cost_is_known
    # A dated id asked for: priced as its family (a snapshot the fake is told of).
    with FakeAnthropicServer(extra_models=[SNAPSHOT]) as fake:
        fake.add(answer(SNAPSHOT))
        at_fake = settings.model_copy(update={"anthropic_base_url": fake.base_url})
        snapshot = LLMRequest(model=SNAPSHOT, system="s", messages=HELLO)
        assert AnthropicLLM(at_fake.llm).complete(snapshot).usage.cost_usd == pytest.approx(2.0)
    # A model the table lacks, whatever the answer says: unknown, not $0.
    fake_llm.add(answer("claude-unpriced-9"))
    missing = llm.complete(LLMRequest(model="claude-unpriced-9", system="s", messages=HELLO))
    assert missing.usage.unpriced_tokens == 1_000_000 and missing.usage.known_cost_usd is None


def test_sonnet_5_5_cache_reads_cost_the_published_10_cents() -> None:
    # The Sonnet 5.5 migration guide: "prompt cache reads, which cost $0.10 USD per million
    # tokens, half the Claude Sonnet 5 rate".
    sonnet = DEFAULT_MODEL_PRICES["claude-sonnet-5-5"]
    assert (sonnet.input, sonnet.output, sonnet.cache_read_rate) == (2, 10, 0.1)
    assert DEFAULT_MODEL_PRICES["claude-sonnet-5"].cache_read_rate == pytest.approx(0.2)
    read = priced(Usage(cache_read_input_tokens=1_000_000), sonnet)
    assert read.cost_usd == pytest.approx(0.10)
