"""Streamed LLM calls: the real SDK against the fake's server-sent events, the model's
breaker in a real Valkey. A slow answer is not an outage; a stalled one is, and an
endpoint where nothing listens fails at once with one line naming it."""

from __future__ import annotations

import time

import pytest
from pydantic import SecretStr

from dagwright.connection import connect
from dagwright.errors import (
    BreakerOpenError,
    LLMEndpointUnreachableError,
    LLMUnavailableError,
)
from dagwright.keys import Keys
from dagwright.llm import LLMRequest
from dagwright.llm.anthropic import AnthropicLLM
from dagwright.resilience import Breakers
from dagwright.settings import Settings
from dagwright.testing import FakeAnthropicServer

MODEL = "claude-haiku-5-5"
BREAKER = f"model:{MODEL}"
REQUEST = LLMRequest(model=MODEL, system="s", messages=[{"role": "user", "content": "hi"}])
LONG_TEXT = "word " * 60  # 300 characters: 30 deltas of 10


def llm_for(base_url: str, breakers: Breakers | None = None, **overrides: object) -> AnthropicLLM:
    options: dict[str, object] = {
        "anthropic_base_url": base_url,
        "anthropic_api_key": SecretStr("k"),
        "llm_retry_backoff_s": 0.01,
        **overrides,
    }
    return AnthropicLLM(Settings(**options).llm, breakers)  # type: ignore[arg-type]


@pytest.fixture
def breakers(no_worker_settings: Settings) -> Breakers:
    """The model's breaker opens at the first failure it counts."""
    return Breakers(
        connect(no_worker_settings.redis.url or "", decode_responses=False),
        Keys(no_worker_settings.redis.key_prefix),
        fail_max=1,
        reset_timeout_s=30.0,
        max_probes=1,
    )


def test_a_streamed_answer_is_assembled_thinking_text_and_tool_input(
    fake_llm: FakeAnthropicServer,
) -> None:
    tool_input = {"city": "Paris", "days": [1, 2, 3], "units": "metric"}
    fake_llm.add(
        {
            "reply": {
                "content": [
                    {"type": "thinking", "thinking": "The user wants weather.", "signature": "s1"},
                    {"type": "text", "text": "Let me look that up."},
                    {"type": "tool_use", "name": "get_weather", "input": tool_input},
                ],
                "usage": {"input_tokens": 42, "output_tokens": 17},
            },
            "stream": {"chunk_chars": 5},
        }
    )
    response = llm_for(fake_llm.base_url).complete(REQUEST)
    assert fake_llm.requests[0].body["stream"] is True
    thinking, text, tool_use = response.content
    assert thinking == {
        "type": "thinking",
        "thinking": "The user wants weather.",
        "signature": "s1",
    }
    assert text["text"] == "Let me look that up."
    assert tool_use["input"] == tool_input and tool_use["name"] == "get_weather"
    assert response.stop_reason == "tool_use"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (42, 17)
    assert response.request_id is not None


def test_a_slow_generation_with_events_between_is_no_outage(
    fake_llm: FakeAnthropicServer, breakers: Breakers
) -> None:
    # ~34 events 0.1 s apart: 3.4 s in all, seven times the idle timeout.
    fake_llm.add(
        {
            "reply": {"content": [{"type": "text", "text": LONG_TEXT}]},
            "stream": {"event_delay_s": 0.1, "chunk_chars": 10},
        }
    )
    llm = llm_for(fake_llm.base_url, breakers, llm_idle_timeout_s=0.5)
    response = llm.complete(REQUEST)
    assert response.text() == LONG_TEXT
    assert response.latency_s > 3 * 0.5
    assert len(fake_llm.requests) == 1
    status = breakers.status(BREAKER)
    assert (status.state, status.failures) == ("closed", 0)


def test_a_stalled_stream_fails_within_its_bounds_and_counts_against_the_breaker(
    fake_llm: FakeAnthropicServer, breakers: Breakers
) -> None:
    fake_llm.add(
        {
            "reply": {"content": [{"type": "text", "text": "never finished"}]},
            "stream": {"event_delay_s": 5.0},
            "times": -1,
        }
    )
    llm = llm_for(fake_llm.base_url, breakers, llm_idle_timeout_s=0.3, llm_max_attempts=1)
    started = time.monotonic()
    with pytest.raises(
        BreakerOpenError, match=r"last failure LLMUnavailableError: .* sent nothing"
    ):
        llm.complete(REQUEST)  # the stall opened the breaker (fail_max 1)
    assert time.monotonic() - started < 2.0
    assert breakers.status(BREAKER).state == "open"


def test_a_stalled_stream_is_retried_then_unavailable(fake_llm: FakeAnthropicServer) -> None:
    fake_llm.add(
        {
            "reply": {"content": [{"type": "text", "text": "never finished"}]},
            "stream": {"event_delay_s": 5.0},
            "times": -1,
        }
    )
    llm = llm_for(fake_llm.base_url, llm_idle_timeout_s=0.3, llm_max_attempts=2)
    with pytest.raises(LLMUnavailableError, match="stalled"):
        llm.complete(REQUEST)
    assert len(fake_llm.requests) == 2


def test_a_call_past_its_deadline_ends_but_does_not_open_the_breaker(
    fake_llm: FakeAnthropicServer, breakers: Breakers
) -> None:
    fake_llm.add(
        {
            "reply": {"content": [{"type": "text", "text": LONG_TEXT}]},
            "stream": {"event_delay_s": 0.1, "chunk_chars": 10},
        }
    )
    # deadline = idle 0.5 s + 4096 tokens / 8192 tokens/s = 1 s, well before the end
    llm = llm_for(fake_llm.base_url, breakers, llm_idle_timeout_s=0.5, llm_min_tokens_per_s=8192)
    with pytest.raises(LLMUnavailableError, match="a slow answer, not an outage"):
        llm.complete(REQUEST)
    assert len(fake_llm.requests) == 1  # not retried in the call: the node decides
    assert breakers.status(BREAKER).state == "closed"


def test_an_overloaded_error_event_mid_stream_is_retried(
    fake_llm: FakeAnthropicServer,
) -> None:
    fake_llm.add(
        {
            "reply": {"content": [{"type": "text", "text": "cut short"}]},
            "stream": {"error_after_events": 3},
        },
        {"reply": {"content": [{"type": "text", "text": "whole"}]}},
    )
    response = llm_for(fake_llm.base_url).complete(REQUEST)
    assert response.text() == "whole"
    assert len(fake_llm.requests) == 2


def test_an_overloaded_error_event_counts_against_the_breaker(
    fake_llm: FakeAnthropicServer, breakers: Breakers
) -> None:
    fake_llm.add(
        {
            "reply": {"content": [{"type": "text", "text": "cut short"}]},
            "stream": {"error_after_events": 2},
            "times": -1,
        }
    )
    with pytest.raises(BreakerOpenError, match="answered an error event: Overloaded"):
        llm_for(fake_llm.base_url, breakers, llm_max_attempts=1).complete(REQUEST)
    assert breakers.status(BREAKER).state == "open"


def test_an_endpoint_where_nothing_listens_fails_at_once_with_one_line() -> None:
    llm = llm_for("http://127.0.0.1:1", llm_max_attempts=3, llm_retry_backoff_s=0.2)
    started = time.monotonic()
    with pytest.raises(LLMEndpointUnreachableError) as raised:
        llm.complete(REQUEST)
    assert time.monotonic() - started < 10
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(
        "the Anthropic API at http://127.0.0.1:1 is unreachable (connection refused) "
        "after 3 attempts in "
    )


@pytest.mark.parametrize(
    ("overrides", "client_class", "endpoint"),
    [
        (
            {"llm_provider": "bedrock", "llm_region": "eu-west-1"},
            "AnthropicBedrock",
            "https://bedrock-runtime.eu-west-1.amazonaws.com",
        ),
        (
            {
                "llm_provider": "vertex",
                "llm_region": "europe-west1",
                "llm_vertex_project_id": "my-project",
            },
            "AnthropicVertex",
            "https://europe-west1-aiplatform.googleapis.com/v1",
        ),
    ],
)
def test_bedrock_and_vertex_clients_are_built_with_our_retries_and_timeouts(
    overrides: dict[str, str], client_class: str, endpoint: str
) -> None:
    """Built only: no network here. Neither needs an Anthropic API key."""
    settings = Settings(anthropic_api_key=None, anthropic_base_url=None, **overrides)  # type: ignore[arg-type]
    llm = AnthropicLLM(settings.llm)
    client = llm._client
    assert type(client).__name__ == client_class
    assert llm.endpoint == endpoint
    assert client.max_retries == 0
    assert (client.timeout.read, client.timeout.connect) == (  # type: ignore[union-attr]
        settings.llm.idle_timeout_s,
        settings.llm.connect_timeout_s,
    )


def test_an_endpoint_where_nothing_listens_does_not_open_the_breaker(breakers: Breakers) -> None:
    """Each node says what is wrong at once, rather than waiting behind an open breaker."""
    llm = llm_for("http://127.0.0.1:1", breakers, llm_max_attempts=2)
    for _ in range(2):
        with pytest.raises(LLMEndpointUnreachableError):
            llm.complete(REQUEST)
    assert breakers.status(BREAKER).state == "closed"


def test_a_long_pause_kept_alive_by_pings_is_no_stall(
    fake_llm: FakeAnthropicServer, breakers: Breakers
) -> None:
    # 1.5 s between events (three idle timeouts), a ping every 0.2 s meanwhile.
    fake_llm.add(
        {
            "reply": {"content": [{"type": "text", "text": "thought hard"}]},
            "stream": {"event_delay_s": 1.5, "ping_every_s": 0.2},
        }
    )
    llm = llm_for(fake_llm.base_url, breakers, llm_idle_timeout_s=0.5, llm_max_attempts=1)
    assert llm.complete(REQUEST).text() == "thought hard"
    assert breakers.status(BREAKER).failures == 0
