"""The Anthropic Messages API: the only module that imports ``anthropic``.

Every call is streamed (``messages.stream``) and the SDK assembles the final message
(text, thinking with its signature, tool inputs from their JSON deltas, usage from
``message_start`` and ``message_delta``, stop reason). Streaming is what lets a long
generation live: the bounds are a short connect timeout, an idle timeout between two events
(the API pings while it works) and an overall deadline from ``max_tokens``
(``llm/call_limits.py``), instead of one total timeout that a slow, healthy answer exceeds.

Who retries what (docs/architecture.md, "Who owns which retry"): the SDK's own retries are off
(``max_retries=0``); this module retries one call on 408/409/429/5xx/529, an error event in
the stream, a stalled stream and connection errors, honouring ``retry-after`` up to a cap;
what still fails leaves as ``LLMUnavailableError`` (retryable: the node level decides
next), except an endpoint where nothing listens (refused, no such host):
``LLMEndpointUnreachableError``, permanent, one line naming the endpoint. Refusals of the
request (400/401/403/404/413/422) and unusable responses are permanent. SDK exceptions
never leave this module.

What counts against the model's breaker (``counts_against_breaker``): connection errors
(reset, connect timeout), a stalled stream (the idle timeout), 5xx/529 and error events
(``overloaded_error``, ``api_error``). Not: 408/409/429 (our pace, not an outage), refusals,
a call past its deadline while events kept coming (slow is not down), and an endpoint where
nothing listens (refused, no such host): each node fails at once with that one line, where
an open breaker would make the nodes behind it wait instead of saying what is wrong.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anthropic
import httpx2  # the SDK's HTTP client (anthropic 2.x), for the errors it lets out of a stream
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from dagwright.errors import (
    LLMEndpointUnreachableError,
    LLMNotConfiguredError,
    LLMRequestError,
    LLMResponseError,
    LLMUnavailableError,
)
from dagwright.llm.batches import BatchFailed, PendingBatch, submitted_now
from dagwright.llm.call_limits import (
    POOL_TIMEOUT_S,
    WRITE_TIMEOUT_S,
    CallLimits,
    unreachable_cause,
)
from dagwright.llm.model_ids import price_of
from dagwright.llm.model_lifecycle import LifecycleGuard
from dagwright.llm.pricing import priced
from dagwright.llm.prompt_caching import system_blocks
from dagwright.llm.protocol import LLMRequest, LLMResponse
from dagwright.llm.wire import message_body
from dagwright.models import Usage
from dagwright.resilience import Breakers, call_directly
from dagwright.settings import LLMSettings, ModelPrice

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRYABLE_STATUSES = frozenset({408, 409, 429, 529}) | frozenset(range(500, 600))
# Error events inside a 200 stream (the SDK raises them as APIStatusError with status 200).
OUTAGE_EVENT_TYPES = frozenset({"overloaded_error", "api_error", "timeout_error"})
NOT_CONFIGURED = (
    "no Anthropic API key: set ANTHROPIC_API_KEY, or point ANTHROPIC_BASE_URL at a "
    "compatible endpoint (e.g. `dagwright fake-llm` for offline runs)"
)
# A budget check waits for the count; past this, it estimates from characters instead.
COUNT_TOKENS_TIMEOUT_S = 10.0
# The SDK insists on a key; an endpoint given without one (a fake, a proxy) gets this.
PLACEHOLDER_KEY = "dagwright-no-key"


class StreamDeadlineExceeded(Exception):
    """A stream still producing events ran past the call's deadline (never leaves here)."""


def is_retryable(exc: BaseException) -> bool:
    """Whether one more attempt of the same call may succeed."""
    if isinstance(exc, anthropic.APIStatusError):
        return exc.status_code in RETRYABLE_STATUSES or is_outage_event(exc)
    return isinstance(exc, anthropic.APIConnectionError)  # timeouts included


def counts_against_breaker(exc: BaseException) -> bool:
    """Whether ``exc`` says the model's endpoint is down (see the module docstring)."""
    if isinstance(exc, anthropic.APIStatusError):
        return exc.status_code >= 500 or is_outage_event(exc)
    if isinstance(exc, anthropic.APIConnectionError):  # a stall is a read timeout
        return unreachable_cause(exc) is None
    return False


def is_outage_event(exc: anthropic.APIStatusError) -> bool:
    """An error event in the middle of a stream that says the API is overloaded or broken."""
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error")
    kind = error.get("type") if isinstance(error, dict) else None
    return exc.status_code < 400 and kind in OUTAGE_EVENT_TYPES


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


SdkClient = anthropic.Anthropic | anthropic.AnthropicBedrock | anthropic.AnthropicVertex


def sdk_client(settings: LLMSettings, limits: CallLimits) -> SdkClient:
    """The SDK's client of ``settings.provider``: its retries off (ours are the only ones),
    httpx's read timeout as the idle timeout (it bounds each read of the stream).
    Bedrock and Vertex AI find their credentials where their SDKs look (the environment)."""
    options: dict[str, Any] = {
        "base_url": settings.base_url,
        "max_retries": 0,
        "timeout": anthropic.Timeout(
            limits.idle_s, connect=limits.connect_s, write=WRITE_TIMEOUT_S, pool=POOL_TIMEOUT_S
        ),
    }
    if settings.provider == "bedrock":
        return anthropic.AnthropicBedrock(aws_region=settings.region, **options)
    if settings.provider == "vertex":
        vertex: dict[str, Any] = {
            "region": settings.region,
            "project_id": settings.vertex_project_id,
        }
        return anthropic.AnthropicVertex(**{k: v for k, v in vertex.items() if v}, **options)
    key = settings.api_key.get_secret_value() if settings.api_key else ""
    if not key and not settings.base_url:
        raise LLMNotConfiguredError(NOT_CONFIGURED)
    return anthropic.Anthropic(api_key=key or PLACEHOLDER_KEY, **options)


def log_retry(state: RetryCallState) -> None:
    """A retried LLM call, as a node's logs show it (telemetry/node_logs.py): which
    attempt failed, of what, and how long it waits."""
    failure = state.outcome.exception() if state.outcome is not None else None
    wait_s = state.next_action.sleep if state.next_action is not None else 0.0
    log.info(
        "LLM call attempt %d failed (%s); retrying in %.1fs",
        state.attempt_number,
        type(failure).__name__,
        wait_s,
    )


class AnthropicLLM:
    """``LLM`` over the Anthropic SDK (``ANTHROPIC_BASE_URL`` honoured), or over Bedrock or
    Vertex AI (``llm_provider``) with the same retries, breakers and accounting."""

    def __init__(self, settings: LLMSettings, breakers: Breakers | None = None) -> None:
        self._limits = CallLimits.of(settings)
        self._client = sdk_client(settings, self._limits)
        self._endpoint = str(self._client.base_url).rstrip("/")
        self._prices = settings.model_prices
        self._search_usd_per_1k = settings.web_search_usd_per_1k
        self._guard = breakers.call if breakers is not None else call_directly
        self._attempts = settings.max_attempts
        self._wait = RetryAfterOrBackoff(settings.retry_after_cap_s, settings.retry_backoff_s)
        self._lifecycle = LifecycleGuard(settings.provider, settings.model_lifecycle_date)

    @property
    def endpoint(self) -> str:
        """Where the calls go (the provider's base URL), as errors name it."""
        return self._endpoint

    def complete(self, request: LLMRequest) -> LLMResponse:
        self._lifecycle.check(request.model)
        started = time.monotonic()
        message, request_id = self.retried(lambda: self._create(request))
        return self.response(message, request, request_id, time.monotonic() - started)

    def retried(
        self, call: Callable[[], T], retry_on: Callable[[BaseException], bool] = is_retryable
    ) -> T:
        """``call`` (an SDK call) under this module's retries (of what ``retry_on`` says
        may succeed once more); its failure translated."""
        started = time.monotonic()
        retrying = Retrying(
            retry=retry_if_exception(retry_on),
            stop=stop_after_attempt(self._attempts),
            wait=self._wait,
            before_sleep=log_retry,
            reraise=True,
        )
        try:
            return retrying(call)
        except StreamDeadlineExceeded as exc:
            raise LLMUnavailableError(str(exc)) from exc
        except anthropic.AnthropicError as exc:
            attempts = retrying.statistics.get("attempt_number", self._attempts)
            elapsed_s = time.monotonic() - started
            raise self._translate(exc, attempts, elapsed_s) from exc
        except ValueError as exc:  # the SDK lets a body that is not JSON through as is
            raise LLMResponseError(
                f"the Anthropic API answered a body that is not JSON: {exc}"
            ) from exc

    @property
    def batches(self) -> AnthropicBatches:
        """The Message Batches API, with this client's retries and price table."""
        return AnthropicBatches(self)

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
            "system": system_blocks(request, None),
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

    def _create(self, request: LLMRequest) -> tuple[Any, str | None]:
        kwargs = message_body(request)
        # The breaker sees each attempt: a burst of 529s opens it within tenacity's retries,
        # and the next attempt fails fast with BreakerOpenError (which tenacity leaves be).
        return self._guard(
            f"model:{request.model}",
            self._stream,
            is_failure=counts_against_breaker,
            describe_failure=self._outage,
            **kwargs,
        )

    def _stream(self, **kwargs: Any) -> tuple[Any, str | None]:
        """One streamed call, assembled by the SDK; ended at the call's deadline."""
        deadline_s = self._limits.deadline_s(kwargs["max_tokens"])
        ends_at = time.monotonic() + deadline_s
        with self._open_stream(kwargs) as stream:
            try:
                for _event in stream:
                    if time.monotonic() > ends_at:
                        raise StreamDeadlineExceeded(
                            f"the Anthropic API was still answering after {deadline_s:.0f} s, "
                            f"the deadline of a call of max_tokens {kwargs['max_tokens']} "
                            "(DAGWRIGHT_LLM_MIN_TOKENS_PER_S); a slow answer, not an outage"
                        )
            except httpx2.TransportError as exc:
                raise stream_broken(exc, stream.response.request) from exc
            return assembled(stream), stream.request_id

    def _open_stream(self, kwargs: dict[str, Any]) -> Any:
        """The SDK's stream of the call: its beta messages when the call names betas
        (context management, ``llm/wire.py``), which also read the beta fields back."""
        if "betas" in kwargs:
            beta: Any = self._client.beta  # each provider's client has its own class
            return beta.messages.stream(**kwargs)
        return self._client.messages.stream(**kwargs)

    def _outage(self, exc: BaseException) -> str:
        """What a failure that counted against the breaker says, for the waiting nodes."""
        if isinstance(exc, anthropic.APITimeoutError):
            return (
                f"LLMUnavailableError: the Anthropic API at {self._endpoint} sent nothing for "
                f"{self._limits.idle_s:g} s (stalled) or took over {self._limits.connect_s:g} s "
                "to connect"
            )
        if isinstance(exc, anthropic.APIConnectionError):
            cause = unreachable_cause(exc) or str(exc)
            return f"LLMUnavailableError: the Anthropic API at {self._endpoint}: {cause}"
        if isinstance(exc, anthropic.APIStatusError):
            status = "an error event" if exc.status_code < 400 else str(exc.status_code)
            return (
                f"LLMUnavailableError: the Anthropic API answered {status}: {_error_message(exc)}"
            )
        return f"{type(exc).__name__}: {exc}"

    def _translate(
        self, exc: anthropic.AnthropicError, attempts: int, elapsed_s: float
    ) -> Exception:
        """``translate``, naming the endpoint when nothing listens there."""
        cause = unreachable_cause(exc) if isinstance(exc, anthropic.APIConnectionError) else None
        if cause is None:
            return translate(exc, attempts)
        return LLMEndpointUnreachableError(
            f"the Anthropic API at {self._endpoint} is unreachable ({cause}) after "
            f"{attempts} attempts in {elapsed_s:.0f} s; check ANTHROPIC_BASE_URL"
        )

    def response(
        self,
        message: Any,
        request: LLMRequest,
        request_id: str | None,
        latency_s: float,
        *,
        batch: bool = False,
    ) -> LLMResponse:
        """The SDK's ``message`` as an LLMResponse, priced (at the batch rate if
        ``batch``); LLMResponseError if it is not a usable message."""
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
                **server_tool_requests(message.usage),
            )
            content = [content_block(block) for block in message.content]
            return LLMResponse(
                content=content,
                stop_reason=message.stop_reason,
                model=message.model,
                usage=priced(
                    usage,
                    self._price(request.model, message.model),
                    self._search_usd_per_1k,
                    batch=batch,
                ),
                request_id=request_id,
                latency_s=latency_s,
                context_edits=applied_edits(message),
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise LLMResponseError(f"unusable message from the Anthropic API: {exc}") from exc


class AnthropicBatches:
    """``MessageBatches`` (``llm/batches.py``) over the SDK's ``messages.batches``."""

    def __init__(self, llm: AnthropicLLM) -> None:
        self._llm = llm
        self._sdk = llm._client.messages.batches

    def submit(self, request: LLMRequest, custom_id: str) -> PendingBatch:
        params = batch_params(request)
        betas = params.pop("betas", None)  # a header of the batch, not a request field
        one = {"custom_id": custom_id, "params": params}
        create = self._sdk.create
        if betas:
            beta = getattr(self._llm._client.beta.messages, "batches", None)
            if beta is None:  # Bedrock and Vertex AI batch otherwise, or not at all
                raise LLMRequestError(f"this provider takes no Message Batch with {betas}")
            create = functools.partial(beta.create, betas=betas)
        # Retried only on answers that say no batch was made: a timed-out create may have
        # made one, and a second would be billed too.
        batch = self._llm.retried(
            lambda: create(requests=[one]),  # type: ignore[list-item]
            retry_on=refused_before_processing,
        )
        return submitted_now(batch.id, custom_id)

    def answer(
        self, pending: PendingBatch, request: LLMRequest
    ) -> LLMResponse | BatchFailed | None:
        batch = self._llm.retried(lambda: self._sdk.retrieve(pending.id))
        if batch.processing_status != "ended":
            return None
        lines = self._llm.retried(lambda: list(self._sdk.results(pending.id)))
        result = next((line.result for line in lines if line.custom_id == pending.custom_id), None)
        if result is None:
            missing = f"Message Batch {pending.id} ended without a result for {pending.custom_id}"
            return BatchFailed(LLMResponseError(missing))
        if result.type != "succeeded":
            return BatchFailed(batch_failure(pending, result))
        latency_s = max(time.time() - pending.submitted_at, 0.0)
        return self._llm.response(result.message, request, None, latency_s, batch=True)

    def cancel(self, batch_id: str) -> None:
        with contextlib.suppress(anthropic.AnthropicError):
            self._sdk.cancel(batch_id)


def refused_before_processing(exc: BaseException) -> bool:
    """A retryable answer to a create that says it made nothing: a status, not a
    connection that broke after the request was sent."""
    return isinstance(exc, anthropic.APIStatusError) and is_retryable(exc)


def batch_params(request: LLMRequest) -> dict[str, Any]:
    """``request`` as a batch request's ``params``: the Messages body, with what the
    SDK's signature no longer names (``extra_body``) folded in."""
    params = message_body(request)
    params.update(params.pop("extra_body", {}))
    return params


# A batch request's error types that the same request would get again: refusals of it.
REFUSED_REQUEST_ERRORS = frozenset(
    {
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
    }
)


def batch_failure(pending: PendingBatch, result: Any) -> Exception:
    """What a request of a batch that did not succeed amounts to: a refusal of the
    request (permanent), or an outage, an expiry or a cancellation (retryable: the next
    attempt sends it again)."""
    where = f"Message Batch {pending.id}"
    if result.type == "errored":
        error = getattr(result.error, "error", None)
        kind, message = getattr(error, "type", "api_error"), getattr(error, "message", "")
        if kind in REFUSED_REQUEST_ERRORS:
            return LLMRequestError(f"the Anthropic API refused the request in {where}: {message}")
        return LLMUnavailableError(f"{where} answered {kind}: {message}")
    if result.type == "expired":
        return LLMUnavailableError(f"{where} expired before it answered (the API's 24 hours)")
    return LLMUnavailableError(f"{where} was cancelled before it answered")


def applied_edits(message: Any) -> list[dict[str, Any]]:
    """The context edits the API applied to the prompt (a beta message's
    ``context_management``; none on a plain message)."""
    managed = getattr(message, "context_management", None)
    edits = getattr(managed, "applied_edits", None) or []
    return [edit.model_dump(mode="json") for edit in edits]


def one_hour_cache_writes(usage: Any) -> int:
    """Cache writes with the 1-hour lifetime, from the usage's ``cache_creation``
    breakdown (absent on older API versions: all writes are then 5-minute ones)."""
    breakdown = getattr(usage, "cache_creation", None)
    return getattr(breakdown, "ephemeral_1h_input_tokens", 0) or 0


# Fields the API wants back even when null (required, nullable in its schema): a web
# search citation's ``title``.
NULLABLE_CITATION_FIELDS = ("title",)


def content_block(block: Any) -> dict[str, Any]:
    """A response block as JSON to send back: unset fields left out, except the nullable
    ones the API requires (a citation without its ``title`` key is a 400)."""
    dumped: dict[str, Any] = block.model_dump(mode="json", exclude_none=True)
    for index, citation in enumerate(getattr(block, "citations", None) or []):
        for name in NULLABLE_CITATION_FIELDS:
            if hasattr(citation, name):
                dumped["citations"][index].setdefault(name, None)
    return dumped


def server_tool_requests(usage: Any) -> dict[str, int]:
    """The usage's ``server_tool_use`` counts (absent: no server tool ran)."""
    counts = getattr(usage, "server_tool_use", None)
    return {
        "web_search_requests": getattr(counts, "web_search_requests", 0) or 0,
        "web_fetch_requests": getattr(counts, "web_fetch_requests", 0) or 0,
    }


def assembled(stream: Any) -> Any:
    """The stream's final message; LLMResponseError if it held none (a body that is not an
    event stream, e.g. a proxy answering JSON, or a stream cut before ``message_start``)."""
    try:
        return stream.get_final_message()
    except AssertionError as exc:  # the SDK asserts that a message_start came
        content_type = stream.response.headers.get("content-type", "none")
        raise LLMResponseError(
            f"the Anthropic API answered no message in its stream (content-type {content_type})"
        ) from exc


def stream_broken(exc: httpx2.TransportError, request: httpx2.Request) -> anthropic.AnthropicError:
    """A transport error while reading a stream, as the SDK's class for it. The SDK wraps
    the errors of sending a request, but lets those of reading its stream out as they are
    (httpx2's): a read timeout there is a stalled stream."""
    if isinstance(exc, httpx2.TimeoutException):
        return anthropic.APITimeoutError(request=request)
    return anthropic.APIConnectionError(message=f"the stream broke: {exc}", request=request)


def translate(exc: anthropic.AnthropicError, attempts: int) -> Exception:
    """An SDK exception as dagwright's error (Retryable or Permanent)."""
    if isinstance(exc, anthropic.APIStatusError):
        return _translate_status(exc, attempts)
    if isinstance(exc, anthropic.APIConnectionError):
        kind = (
            "stalled (no event within the idle timeout, or no connection within the "
            "connect timeout)"
            if isinstance(exc, anthropic.APITimeoutError)
            else "was unreachable"
        )
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
