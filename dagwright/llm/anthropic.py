"""The Anthropic Messages API: the only module that imports ``anthropic``.

Who retries what (docs/architecture.md §6): the SDK's own retries are off
(``max_retries=0``); this module retries one call on 408/409/429/5xx/529 and connection
errors, honouring ``retry-after`` up to a cap; what still fails leaves as
``LLMUnavailableError`` (retryable: the node level decides next). Refusals of the request
(400/401/403/404/413/422) and unusable responses are permanent. SDK exceptions never leave
this module.
"""

from __future__ import annotations

import time
from typing import Any

import anthropic
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from dagwright.errors import (
    LLMNotConfiguredError,
    LLMRequestError,
    LLMResponseError,
    LLMUnavailableError,
)
from dagwright.llm.model_ids import price_of
from dagwright.llm.pricing import priced
from dagwright.llm.protocol import LLMRequest, LLMResponse
from dagwright.llm.wire import message_body
from dagwright.models import Usage
from dagwright.resilience import Breakers, call_directly
from dagwright.settings import LLMSettings, ModelPrice

RETRYABLE_STATUSES = frozenset({408, 409, 429, 529}) | frozenset(range(500, 600))
NOT_CONFIGURED = (
    "no Anthropic API key: set ANTHROPIC_API_KEY, or point ANTHROPIC_BASE_URL at a "
    "compatible endpoint (e.g. `dagwright fake-llm` for offline runs)"
)
# A budget check waits for the count; past this, it estimates from characters instead.
COUNT_TOKENS_TIMEOUT_S = 10.0
# The SDK insists on a key; an endpoint given without one (a fake, a proxy) gets this.
PLACEHOLDER_KEY = "dagwright-no-key"


def is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, anthropic.APIStatusError):
        return exc.status_code in RETRYABLE_STATUSES
    return isinstance(exc, anthropic.APIConnectionError)  # timeouts included


def retry_after_s(exc: BaseException | None) -> float | None:
    """The server's requested wait (``retry-after-ms`` or ``retry-after`` seconds)."""
    response = getattr(exc, "response", None)
    if response is None:
        return None
    headers = response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return float(headers[name]) * scale
        except (KeyError, ValueError):
            continue
    return None


class RetryAfterOrBackoff:
    """tenacity wait: the server's retry-after (capped), else jittered exponential backoff."""

    def __init__(self, cap_s: float, backoff_s: float) -> None:
        self.cap_s = cap_s
        self.backoff = wait_exponential_jitter(
            multiplier=backoff_s, max=max(backoff_s, cap_s), jitter=backoff_s
        )

    def __call__(self, state: RetryCallState) -> float:
        hinted = retry_after_s(state.outcome.exception() if state.outcome else None)
        if hinted is not None:
            return min(max(hinted, 0.0), self.cap_s)
        return float(self.backoff(state))


class AnthropicLLM:
    """``LLM`` over the Anthropic SDK (``ANTHROPIC_BASE_URL`` honoured)."""

    def __init__(self, settings: LLMSettings, breakers: Breakers | None = None) -> None:
        key = settings.api_key.get_secret_value() if settings.api_key else ""
        if not key and not settings.base_url:
            raise LLMNotConfiguredError(NOT_CONFIGURED)
        self._client = anthropic.Anthropic(
            api_key=key or PLACEHOLDER_KEY,
            base_url=settings.base_url,
            max_retries=0,
            timeout=settings.timeout_s,
        )
        self._prices = settings.model_prices
        self._guard = breakers.call if breakers is not None else call_directly
        self._attempts = settings.max_attempts
        self._wait = RetryAfterOrBackoff(settings.retry_after_cap_s, settings.retry_backoff_s)

    def complete(self, request: LLMRequest) -> LLMResponse:
        started = time.monotonic()
        retrying = Retrying(
            retry=retry_if_exception(is_retryable),
            stop=stop_after_attempt(self._attempts),
            wait=self._wait,
            reraise=True,
        )
        try:
            message = retrying(self._create, request)
        except anthropic.AnthropicError as exc:
            raise translate(exc, self._attempts) from exc
        except ValueError as exc:  # the SDK lets a body that is not JSON through as is
            raise LLMResponseError(
                f"the Anthropic API answered a body that is not JSON: {exc}"
            ) from exc
        return self._response(message, request.model, time.monotonic() - started)

    def _price(self, requested_model: str, answered_model: str) -> ModelPrice | None:
        # Priced as requested: the budget reserved at that model's price, and the answer
        # may name a dated snapshot or another id of the family; the answer's id is the
        # fallback for a requested alias the table lacks.
        return price_of(requested_model, self._prices) or price_of(answered_model, self._prices)

    def count_input_tokens(self, request: LLMRequest) -> int:
        """The input tokens of ``request`` by ``POST /v1/messages/count_tokens`` (free, not
        retried here: a caller without an answer estimates instead)."""
        kwargs: dict[str, Any] = {
            "model": request.model,
            "system": request.system,
            "messages": request.messages,
        }
        if request.tools:
            kwargs["tools"] = request.tools
        try:
            counting = self._client.with_options(timeout=COUNT_TOKENS_TIMEOUT_S)
            counted = counting.messages.count_tokens(**kwargs)
            return int(counted.input_tokens)
        except anthropic.AnthropicError as exc:
            raise translate(exc, attempts=1) from exc
        except (AttributeError, TypeError, ValueError) as exc:
            raise LLMResponseError(f"unusable count_tokens answer: {exc}") from exc

    def _create(self, request: LLMRequest) -> Any:
        kwargs = message_body(request)
        # The breaker sees each attempt: a burst of 529s opens it within tenacity's retries,
        # and the next attempt fails fast with BreakerOpenError (which tenacity leaves be).
        return self._guard(
            f"model:{request.model}",
            self._client.messages.create,
            is_failure=is_retryable,
            **kwargs,
        )

    def _response(self, message: Any, requested_model: str, latency_s: float) -> LLMResponse:
        # The SDK does not validate responses: a body missing fields arrives as None.
        required = ("content", "usage", "model", "stop_reason")
        missing = [name for name in required if getattr(message, name, None) is None]
        if missing:
            raise LLMResponseError(
                f"the Anthropic API answered a message without {', '.join(missing)}"
            )
        try:
            usage = Usage(
                input_tokens=message.usage.input_tokens or 0,
                output_tokens=message.usage.output_tokens or 0,
                cache_read_input_tokens=getattr(message.usage, "cache_read_input_tokens", 0) or 0,
                cache_creation_input_tokens=getattr(message.usage, "cache_creation_input_tokens", 0)
                or 0,
                cache_creation_1h_input_tokens=one_hour_cache_writes(message.usage),
                llm_calls=1,
            )
            content = [
                block.model_dump(mode="json", exclude_none=True) for block in message.content
            ]
            return LLMResponse(
                content=content,
                stop_reason=message.stop_reason,
                model=message.model,
                usage=priced(usage, self._price(requested_model, message.model)),
                request_id=getattr(message, "_request_id", None),
                latency_s=latency_s,
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise LLMResponseError(f"unusable message from the Anthropic API: {exc}") from exc


def one_hour_cache_writes(usage: Any) -> int:
    """Cache writes with the 1-hour lifetime, from the usage's ``cache_creation``
    breakdown (absent on older API versions: all writes are then 5-minute ones)."""
    breakdown = getattr(usage, "cache_creation", None)
    return getattr(breakdown, "ephemeral_1h_input_tokens", 0) or 0


def translate(exc: anthropic.AnthropicError, attempts: int) -> Exception:
    """An SDK exception as dagwright's error (Retryable or Permanent)."""
    if isinstance(exc, anthropic.APIStatusError):
        return _translate_status(exc, attempts)
    if isinstance(exc, anthropic.APIConnectionError):
        kind = "timed out" if isinstance(exc, anthropic.APITimeoutError) else "was unreachable"
        return LLMUnavailableError(f"the Anthropic API {kind} ({attempts} attempts): {exc}")
    return LLMResponseError(f"the Anthropic API answered an unusable response: {exc}")


def _translate_status(exc: anthropic.APIStatusError, attempts: int) -> Exception:
    status = exc.status_code
    detail = _error_message(exc)
    if status in RETRYABLE_STATUSES:
        error = LLMUnavailableError(
            f"the Anthropic API answered {status} ({attempts} attempts): {detail}"
        )
        error.retry_after_s = retry_after_s(exc)  # type: ignore[attr-defined]
        return error
    if status in (401, 403):
        return LLMRequestError(
            f"the Anthropic API refused the API key ({status}: {detail}); check ANTHROPIC_API_KEY"
        )
    return LLMRequestError(f"the Anthropic API refused the request ({status}): {detail}")


def _error_message(exc: anthropic.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else None
    return str(error.get("message")) if error else str(exc.message)
