"""The LLM layer alone: the Anthropic adapter (real SDK, fake server) and the cache."""

from __future__ import annotations

import pytest
import redis
from pydantic import SecretStr

from dagwright.errors import LLMNotConfiguredError, LLMRequestError
from dagwright.keys import Keys
from dagwright.llm import CachingLLM, LLMRequest
from dagwright.llm.anthropic import AnthropicLLM
from dagwright.settings import Settings
from dagwright.testing import FakeAnthropicServer, ScriptedLLM
from dagwright.testing.scripted import text
from tests.support.llm_script import UNPRICED_MODEL

REQUEST = LLMRequest(
    model="claude-sonnet-4-6", system="s", messages=[{"role": "user", "content": "hi"}]
)


def llm_for(server: FakeAnthropicServer, **overrides: object) -> AnthropicLLM:
    settings = Settings(
        anthropic_base_url=server.base_url,
        anthropic_api_key=SecretStr("k"),
        llm_retry_backoff_s=0.01,
        **overrides,
    )
    return AnthropicLLM(settings.llm)


def test_no_key_and_no_base_url_fails_before_any_call() -> None:
    with pytest.raises(LLMNotConfiguredError, match="no Anthropic API key: set ANTHROPIC_API_KEY"):
        AnthropicLLM(Settings(anthropic_api_key=None, anthropic_base_url=None).llm)


def test_a_response_is_typed_and_priced(fake_llm: FakeAnthropicServer) -> None:
    fake_llm.add(
        {
            "reply": {
                "content": [{"type": "text", "text": "hello"}],
                "usage": {"input_tokens": 1_000_000, "output_tokens": 1_000_000},
            }
        }
    )
    response = llm_for(fake_llm).complete(REQUEST)
    assert response.text() == "hello" and response.stop_reason == "end_turn"
    assert response.usage.cost_usd == pytest.approx(3 + 15)  # sonnet-4-6: $3 in, $15 out per MTok
    assert fake_llm.requests[0].body["max_tokens"] == 4096
    assert "temperature" not in fake_llm.requests[0].body  # never sent unless asked for


def test_temperature_goes_in_the_body_only_when_set(fake_llm: FakeAnthropicServer) -> None:
    fake_llm.add({"reply": {"content": [{"type": "text", "text": "x"}]}})
    llm_for(fake_llm).complete(REQUEST.model_copy(update={"temperature": 0.0}))
    assert fake_llm.requests[0].body["temperature"] == 0.0


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (401, r"refused the API key \(401"),
        (400, r"refused the request \(400\)"),
        (404, r"refused the request \(404\)"),
    ],
)
def test_refusals_are_permanent_and_not_retried(
    fake_llm: FakeAnthropicServer, status: int, message: str
) -> None:
    fake_llm.add({"status": status, "times": -1})
    with pytest.raises(LLMRequestError, match=message):
        llm_for(fake_llm).complete(REQUEST)
    assert len(fake_llm.requests) == 1


def test_an_unpriced_model_costs_unknown_and_its_tokens_are_counted(
    fake_llm: FakeAnthropicServer,
) -> None:
    fake_llm.add(
        {
            "reply": {
                "content": [{"type": "text", "text": "x"}],
                "usage": {"input_tokens": 7, "output_tokens": 3},
            }
        }
    )
    unpriced = REQUEST.model_copy(update={"model": UNPRICED_MODEL})
    usage = llm_for(fake_llm).complete(unpriced).usage
    assert (usage.input_tokens, usage.unpriced_tokens, usage.known_cost_usd) == (7, 10, None)


def test_the_cache_answers_only_the_requests_that_opt_in(redis_client: redis.Redis) -> None:
    inner = ScriptedLLM([text("first"), text("second"), text("third"), text("fourth")])
    cache = CachingLLM(inner, redis_client, Keys(), ttl_s=60)
    opted_in = REQUEST.model_copy(update={"response_cache": True})  # no temperature needed
    assert cache.complete(opted_in).text() == "first"
    hit = cache.complete(opted_in.model_copy(update={"prompt_cache_ttl": "1h"}))
    assert hit.text() == "first" and hit.cached and hit.usage.total_tokens == 0
    assert len(inner.requests) == 1
    assert cache.complete(REQUEST).text() == "second"  # not opted in: never cached
    assert cache.complete(REQUEST).text() == "third"
    thinking = opted_in.model_copy(update={"thinking": {"type": "adaptive"}})
    assert cache.complete(thinking).text() == "fourth"  # another request: another key
    assert redis_client.ttl(Keys().llm_cache(opted_in.digest())) > 0


def test_the_cache_key_of_a_request_without_new_fields_is_unchanged() -> None:
    # The key as computed before thinking, effort and delivery fields existed.
    legacy = (
        '{"max_tokens":4096,"messages":[{"content":"hi","role":"user"}],'
        '"model":"claude-sonnet-4-6","system":"s","temperature":null,"tools":[]}'
    )
    assert REQUEST.canonical_json() == legacy
    assert REQUEST.model_copy(update={"prompt_cache_ttl": "5m"}).digest() == REQUEST.digest()
