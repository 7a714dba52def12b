"""Sending a run's trace to an OpenTelemetry collector over OTLP/HTTP (protobuf).

Optional: it needs the ``opentelemetry`` extra (``opentelemetry-sdk`` and
``opentelemetry-exporter-otlp-proto-http``), imported only when
``settings.telemetry.otlp_endpoint`` is set. Without them, the first attempt logs one warning and
nothing is exported; nothing else changes.

A run is one OTel trace. Its id, and each span's id, are derived from the run id (and
the span's own id) by SHA-256: an export sent twice carries the same ids, so a backend
shows one trace, and anyone holding a run id can find its trace. The spans are the
same as ``dagwright trace`` shows, with their exact times, parents and attributes, plus
``dagwright.run_id``, ``dagwright.span_id``, ``dagwright.node`` and
``dagwright.attempt``; LLM calls also get the ``gen_ai.*`` attributes backends know.

Which process exports, and when: see ``telemetry/trace_export.py``.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from dagwright.telemetry.run_trace import Trace
from dagwright.telemetry.spans import LLM_CALL, Span

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

log = logging.getLogger(__name__)

OTEL_MODULES = ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter")
TRACES_PATH = "/v1/traces"
SERVICE_NAME = "dagwright"
EXPORT_TIMEOUT_S = 10.0
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# gen_ai semantic conventions, for the LLM-call spans.
GEN_AI_ATTRIBUTES = {
    "model": "gen_ai.request.model",
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
}


def otel_trace_id(run_id: str) -> int:
    """The run's 128-bit trace id (never 0, which OTel reserves for "invalid")."""
    return _digest(f"dagwright.run:{run_id}", 16)


def otel_span_id(run_id: str, span_id: str) -> int:
    """A span's 64-bit id, unique within its run's trace."""
    return _digest(f"dagwright.span:{run_id}/{span_id}", 8)


def _digest(text: str, size: int) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:size], "big") or 1


def unix_nanos(when: datetime) -> int:
    """Exact: integer arithmetic, no float rounding of epoch seconds."""
    return ((when - EPOCH) // timedelta(microseconds=1)) * 1000


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of ``endpoint``: a base (``http://collector:4318``) gets
    ``/v1/traces``, as with OTEL_EXPORTER_OTLP_ENDPOINT; a full URL is kept."""
    if urlsplit(endpoint).path.rstrip("/").endswith(TRACES_PATH):
        return endpoint
    return endpoint.rstrip("/") + TRACES_PATH


class OtlpTraceExporter:
    """Exports whole traces, one request each, with the OTel SDK's OTLP/HTTP exporter."""

    def __init__(self, endpoint: str, timeout_s: float = EXPORT_TIMEOUT_S) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        self.url = traces_url(endpoint)
        self._exporter = OTLPSpanExporter(endpoint=self.url, timeout=timeout_s)

    def export(self, trace: Trace) -> bool:
        """True if the collector accepted the whole trace."""
        from opentelemetry.sdk.trace.export import SpanExportResult

        spans = readable_spans(trace)
        return bool(self._exporter.export(spans) == SpanExportResult.SUCCESS)


def exporting(endpoint: str | None) -> bool:
    """Whether traces are exported: an endpoint is set and the extra is installed (if
    not, said once in the log)."""
    return bool(endpoint) and _otel_installed()


def exporter_for(endpoint: str | None) -> OtlpTraceExporter | None:
    """The exporter of ``endpoint``; None if traces are not exported."""
    return OtlpTraceExporter(endpoint) if endpoint and exporting(endpoint) else None


def otel_missing() -> ImportError | None:
    """The ImportError of the first OpenTelemetry module not installed; None if all are."""
    try:
        for module in OTEL_MODULES:
            importlib.import_module(module)
    except ImportError as exc:
        return exc
    return None


@cache
def _otel_installed() -> bool:
    exc = otel_missing()
    if exc is not None:
        log.warning(
            "otlp_endpoint is set but OpenTelemetry is not installed (%s): traces are not "
            "exported; install dagwright[opentelemetry]",
            exc,
        )
        return False
    return True


def readable_spans(trace: Trace) -> list[ReadableSpan]:
    """The trace's spans as the OTel SDK's finished spans, ready for any exporter."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    resource = Resource.create({"service.name": SERVICE_NAME})
    scope = InstrumentationScope("dagwright")
    return [_readable(trace, span, resource, scope) for span in trace.spans]


def _readable(trace: Trace, span: Span, resource: Any, scope: Any) -> ReadableSpan:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

    trace_id = otel_trace_id(trace.run_id)
    flags = TraceFlags(TraceFlags.SAMPLED)

    def context(span_id: str) -> SpanContext:
        return SpanContext(trace_id, otel_span_id(trace.run_id, span_id), False, flags)

    status = (
        Status(StatusCode.ERROR, str(span.attributes.get("outcome", "error")))
        if span.status == "error"
        else Status(StatusCode.UNSET)
    )
    return ReadableSpan(
        name=span.name,
        context=context(span.span_id),
        parent=context(span.parent_id) if span.parent_id else None,
        resource=resource,
        attributes=otel_attributes(trace.run_id, span),
        status=status,
        start_time=unix_nanos(span.start),
        end_time=unix_nanos(span.end),
        instrumentation_scope=scope,
    )


def otel_attributes(run_id: str, span: Span) -> dict[str, str | int | float | bool]:
    attributes: dict[str, str | int | float | bool] = {
        **span.attributes,
        "dagwright.run_id": run_id,
        "dagwright.span_id": span.span_id,
    }
    if span.node is not None:
        attributes["dagwright.node"] = span.node
    if span.attempt is not None:
        attributes["dagwright.attempt"] = span.attempt
    if span.name == LLM_CALL:
        attributes["gen_ai.system"] = "anthropic"
        for ours, theirs in GEN_AI_ATTRIBUTES.items():
            if ours in span.attributes:
                attributes[theirs] = span.attributes[ours]
    return attributes
