"""The OTLP export of finished runs' traces: real worker subprocesses (each running a
reconciler), a real loopback OTLP/HTTP receiver parsing the protobuf requests."""

from __future__ import annotations

import logging
import sys

import pytest
import redis

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.orchestrator.runtime import Runtime
from dagwright.settings import Settings
from dagwright.telemetry import otlp
from dagwright.telemetry.otlp import otel_span_id, otel_trace_id, unix_nanos
from dagwright.telemetry.run_trace import Trace
from dagwright.telemetry.spans import LLM_CALL, NODE_ATTEMPT, TOOL_CALL
from dagwright.telemetry.trace_export import EXPORTED_FIELD, TraceExport
from dagwright.testing import FakeAnthropicServer
from tests.support.llm_script import text, turn
from tests.support.otlp import OtlpReceiver, attribute_values, resource_values
from tests.support.processes import Workers
from tests.support.waiting import wait_until

WRITER = "You are the writer"


def tool_then_writer() -> PlanBuilder:
    plan = PlanBuilder("a note")
    tool = plan.function("tool", "record_tool_span", params={"tool": "lookup"})
    plan.agent("write", "writer", "Write a note.", depends_on=[tool])
    return plan


def assert_exported_as_recorded(trace: Trace, exported: list[object]) -> None:
    """Every span of the trace arrived once, with its name, parent, times, attributes."""
    by_id = {span.span_id: span for span in exported}  # type: ignore[attr-defined]
    assert len(by_id) == len(exported) == len(trace.spans)
    for span in trace.spans:
        sent = by_id[otel_span_id(trace.run_id, span.span_id).to_bytes(8, "big")]
        assert sent.name == span.name
        parent = b"" if span.parent_id is None else otel_span_id(trace.run_id, span.parent_id)
        assert sent.parent_span_id == (parent.to_bytes(8, "big") if parent else b"")
        assert sent.start_time_unix_nano == unix_nanos(span.start)
        assert sent.end_time_unix_nano == unix_nanos(span.end)
        attributes = attribute_values(sent)
        assert attributes.items() >= span.attributes.items(), span.span_id
        assert attributes["dagwright.run_id"] == trace.run_id
        assert sent.status.code == (2 if span.status == "error" else 0)


def test_a_finished_run_is_exported_once_with_every_span(
    subprocess_settings: Settings,
    workers: Workers,
    fake_llm: FakeAnthropicServer,
    redis_client: redis.Redis,
) -> None:
    with OtlpReceiver(refuse_first=1) as receiver:
        settings = subprocess_settings.model_copy(update={"otlp_endpoint": receiver.url})
        workers.start(settings, pool="threads")  # two reconcilers: one export still
        workers.start(settings, pool="threads")
        fake_llm.add(turn(WRITER, 1, text("The note."), tokens=(300, 40)))
        client = Client(settings)
        run = client.submit(tool_then_writer().build())
        assert run.wait(timeout=90).status == RunStatus.SUCCEEDED, workers.log_tails()
        trace_id = otel_trace_id(run.run_id)
        wait_until(lambda: receiver.requests_with(trace_id), timeout=60, what="the export")

        # Later passes export a second run; by then the first would have gone again.
        second = client.submit({"nodes": [{"id": "n", "type": "function", "function": "noop"}]})
        assert second.wait(timeout=60).status == RunStatus.SUCCEEDED
        wait_until(lambda: receiver.requests_with(otel_trace_id(second.run_id)), timeout=60)

        (exported,) = receiver.requests_with(trace_id)  # once, after one refusal
        assert receiver.refused == 1
        trace = client.trace(run.run_id)
        assert_exported_as_recorded(trace, exported)
        names = sorted(span.name for span in exported)
        assert names == sorted(["run", NODE_ATTEMPT, NODE_ATTEMPT, LLM_CALL, TOOL_CALL])
        llm = next(span for span in exported if span.name == LLM_CALL)
        assert attribute_values(llm)["gen_ai.usage.input_tokens"] == 300
        assert resource_values(receiver.accepted[0])["service.name"] == "dagwright"

        runtime = client.runtime
        run_hash = runtime.keys.run_key(run.run_id, "run")
        assert redis_client.hget(run_hash, EXPORTED_FIELD) == redis_client.hget(
            run_hash, "finished_at"
        )
        wait_until(lambda: not redis_client.zcard(runtime.keys.trace_exports))


def test_without_opentelemetry_the_endpoint_is_ignored_with_one_warning(
    no_worker_settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for module in otlp.OTEL_MODULES:
        monkeypatch.setitem(sys.modules, module, None)  # what an absent package looks like
    otlp._otel_installed.cache_clear()
    settings = no_worker_settings.model_copy(update={"otlp_endpoint": "http://127.0.0.1:9"})
    runtime = Runtime.from_settings(settings)
    try:
        with caplog.at_level(logging.WARNING, logger="dagwright.telemetry.otlp"):
            first, second = TraceExport.for_runtime(runtime), TraceExport.for_runtime(runtime)
        assert first.exporter is None and second.exporter is None
        warnings = [r.getMessage() for r in caplog.records if r.name == "dagwright.telemetry.otlp"]
        assert len(warnings) == 1 and "install dagwright[opentelemetry]" in warnings[0]
        runtime.client.hset(runtime.keys.run_key("ended", "run"), "status", "succeeded")
        runtime.forget_active("ended")  # not queued for an export that cannot happen
        assert not runtime.client.exists(runtime.keys.trace_exports)
        assert first.export_due() == 0
    finally:
        otlp._otel_installed.cache_clear()


def test_trace_and_span_ids_are_stable_and_distinct() -> None:
    assert otel_trace_id("run-a") == otel_trace_id("run-a") != otel_trace_id("run-b")
    assert otel_span_id("run-a", "n#1") != otel_span_id("run-a", "n#2")
    assert otel_span_id("run-a", "n#1") != otel_span_id("run-b", "n#1")
    assert otlp.traces_url("http://c:4318") == "http://c:4318/v1/traces"
    assert otlp.traces_url("http://c:4318/") == "http://c:4318/v1/traces"
    assert otlp.traces_url("http://c/otlp/v1/traces") == "http://c/otlp/v1/traces"
