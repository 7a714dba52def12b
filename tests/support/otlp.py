"""A loopback OTLP/HTTP traces receiver: what a collector would get, parsed."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as OtlpSpan

from tests.support.loopback_http import LoopbackServer


class OtlpReceiver(LoopbackServer):
    """Serves POST /v1/traces on 127.0.0.1; refuses the first ``refuse_first`` requests
    (HTTP 500), keeps the others' parsed bodies."""

    def __init__(self, refuse_first: int = 0) -> None:
        self.accepted: list[ExportTraceServiceRequest] = []
        self.refused = 0
        self._refuse_left = refuse_first
        super().__init__()

    def requests_with(self, trace_id: int) -> list[list[OtlpSpan]]:
        """The spans of ``trace_id`` in each accepted request that had any."""
        wanted = trace_id.to_bytes(16, "big")
        with self._lock:
            requests = list(self.accepted)
        found = []
        for request in requests:
            spans = [span for span in _spans(request) if span.trace_id == wanted]
            if spans:
                found.append(spans)
        return found

    def _receive(self, body: bytes) -> int:
        with self._lock:
            if self._refuse_left > 0:
                self._refuse_left -= 1
                self.refused += 1
                return 500
            self.accepted.append(ExportTraceServiceRequest.FromString(body))
            return 200

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                status = receiver._receive(body) if self.path == "/v1/traces" else 404
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


def _spans(request: ExportTraceServiceRequest) -> Iterator[OtlpSpan]:
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            yield from scope_spans.spans


def attribute_values(span: OtlpSpan) -> dict[str, Any]:
    """An OTLP span's attributes as plain values."""
    values = {}
    for item in span.attributes:
        kind = item.value.WhichOneof("value")
        values[item.key] = getattr(item.value, kind) if kind else None
    return values


def resource_values(request: ExportTraceServiceRequest) -> dict[str, Any]:
    resource = request.resource_spans[0].resource
    return {item.key: item.value.string_value for item in resource.attributes}
