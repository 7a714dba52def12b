"""Spans the workers record in each run's ``spans`` stream (tool calls, sandbox runs, breaker
events), on real Valkey: from real worker processes, and from the services driven by hand."""

from __future__ import annotations

import json
import logging
import socket
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from pydantic import SecretStr

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.errors import BreakerOpenError
from dagwright.keys import Keys
from dagwright.models import Approval, ApprovalDecision, ApprovalStatus, Node, NodeState, Plan
from dagwright.orchestrator.execution.services import RedisNodeServices
from dagwright.orchestrator.runstate.store import new_run_id
from dagwright.orchestrator.runtime import Runtime
from dagwright.plans.validation import PlanLimits, validate_plan
from dagwright.telemetry.recorder import SpanRecorder
from dagwright.telemetry.spans import BREAKER, SANDBOX_EXEC, TOOL_CALL, Span
from dagwright.testing import FakeAnthropicServer, ScriptedLLM
from dagwright.testing.scripted import reply
from dagwright.workers import NodeContext, builtin_registry
from dagwright.workers.agent_loop import AgentSpec, run_agent
from dagwright.workers.proposals import ApprovalNeeded, Proposal
from dagwright.workers.python import run_python_node
from dagwright.workers.tools.policy import PolicyAction, PolicyRule, ToolPolicy
from tests.support.agents import MemoryServices, agent_context
from tests.support.llm_script import RESEARCHER, call, text, turn
from tests.support.processes import Workers
from tests.support.sandboxes import require_a_sandbox
from tests.support.waiting import wait_until

API_KEY = "sk-ant-api03-" + "Q7x" * 16  # the worker's: must appear in no span
ARGUMENT_SECRET = "hunter2-not-for-traces"  # in a tool's arguments: must appear in no span
CLOCK_SLACK = timedelta(milliseconds=1)  # node times are whole milliseconds


def spans_of(client: Client, run_id: str) -> list[Span]:
    entries = client.runtime.client.xrange(client.runtime.keys.run_key(run_id, "spans"))
    return [Span.model_validate_json(fields["span"]) for _, fields in entries]


def raw_stream(client: Client, run_id: str) -> str:
    entries = client.runtime.client.xrange(client.runtime.keys.run_key(run_id, "spans"))
    return json.dumps(entries)


def assert_within(span: Span, node: NodeState) -> None:
    assert node.started_at is not None and node.finished_at is not None
    assert node.started_at - CLOCK_SLACK <= span.start <= span.end <= node.finished_at + CLOCK_SLACK


def tool_use(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    return {**call(name, **arguments), "id": call_id}


# -- from a real worker process -------------------------------------------------------------


@pytest.mark.sandbox
def test_a_run_records_its_tool_calls_and_sandbox_runs_without_secrets(
    subprocess_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer
) -> None:
    backend = require_a_sandbox().name  # and the worker uses that one (auto may differ)
    settings = subprocess_settings.model_copy(
        update={"anthropic_api_key": SecretStr(API_KEY), "sandbox_backend": backend}
    )
    secret_note = f"key {API_KEY} password={ARGUMENT_SECRET}"
    fake_llm.add(
        turn(
            RESEARCHER,
            1,
            tool_use("read_input", "toolu_read", node="brief"),
            tool_use("workspace_write", "toolu_write", path="notes.md", content=secret_note),
            tool_use("http_get", "toolu_get", url="https://example.com/"),  # no domain allowed
            tool_use("run_python", "toolu_run", code="print(1)"),  # not a researcher's tool
        ),
        turn(RESEARCHER, 3, text("Streams are logs.")),
    )
    plan = PlanBuilder("spans")
    brief = plan.function("brief", "concat", params={"parts": ["Topic: streams"]})
    plan.agent("research", "researcher", "Collect facts.", depends_on=[brief])
    plan.python("total", "import json\nprint(json.dumps({'total': 1 + 2}))")
    workers.start(settings)
    client = Client(settings)
    run = client.submit(plan.build(output=["research", "total"]))
    state = run.wait(timeout=120)
    assert state.status == RunStatus.SUCCEEDED, workers.log_tails()

    spans = spans_of(client, run.run_id)
    tools = {span.attributes["tool_use_id"]: span for span in spans if span.name == TOOL_CALL}
    assert {key: (s.attributes["tool"], s.attributes["decision"], s.attributes["outcome"], s.status)
            for key, s in tools.items()} == {
        "toolu_read": ("read_input", "allow", "ok", "ok"),
        "toolu_write": ("workspace_write", "allow", "ok", "ok"),
        # Neither is offered to this researcher (no domain allowed; not its tool): each is
        # answered "no such tool", before any policy is asked.
        "toolu_get": ("http_get", "unknown", "error", "error"),
        "toolu_run": ("run_python", "unknown", "error", "error"),
    }  # fmt: skip
    written = {"path": "notes.md", "content": secret_note}
    assert tools["toolu_write"].attributes["input_bytes"] == len(json.dumps(written).encode())
    # The size of what the model was given: the input, delimited as untrusted data.
    [answered] = [
        block
        for block in fake_llm.requests[1].body["messages"][-1]["content"]
        if block.get("tool_use_id") == "toolu_read"
    ]
    given = (
        answered["content"]
        if isinstance(answered["content"], str)
        else answered["content"][0]["text"]
    )
    assert "Topic: streams" in given and "<untrusted_input_" in given
    assert tools["toolu_read"].attributes["output_bytes"] == len(given.encode())
    for span in tools.values():
        assert (span.node, span.attempt, span.parent_id) == ("research", 1, "research#1")
        assert_within(span, state.nodes["research"])

    [sandbox] = [span for span in spans if span.name == SANDBOX_EXEC]
    assert (sandbox.node, sandbox.parent_id, sandbox.status) == ("total", "total#1", "ok")
    attributes = dict(sandbox.attributes)
    duration = attributes.pop("duration_s")
    assert attributes == {
        "backend": backend,
        "exit_code": 0,
        "timed_out": False,
        "oom": False,
        "truncated": False,
        "cancelled": False,
    }
    assert 0 < float(duration) <= sandbox.duration_s + 0.001
    assert_within(sandbox, state.nodes["total"])
    assert {span.name for span in spans} == {TOOL_CALL, SANDBOX_EXEC}  # nothing else recorded

    raw = raw_stream(client, run.run_id)
    assert API_KEY not in raw and ARGUMENT_SECRET not in raw and "Topic: streams" not in raw
    # Ended: the stream expires with the run's other keys.
    keys, store = client.runtime.keys, client.runtime.client
    run_ttl = store.ttl(keys.run_key(run.run_id, "run"))
    assert 0 < run_ttl - 5 <= store.ttl(keys.run_key(run.run_id, "spans")) <= run_ttl


def test_an_llm_breaker_s_events_are_spans_of_the_node_whose_calls_caused_them(
    subprocess_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer
) -> None:
    # Three attempts of one call fail: the third opens the model's breaker.
    settings = subprocess_settings.model_copy(
        update={"breaker_fail_max": 3, "breaker_reset_timeout_s": 2.0, "llm_max_attempts": 3}
    )
    fake_llm.add({"reply": {"content": [text("Found it.")]}, "times": -1})
    fake_llm.set_fault_rate(1.0, (529,), seed=1)
    workers.start(settings, concurrency=1)
    client = Client(settings)
    plan = PlanBuilder("dead api")
    plan.agent("ask", "researcher", "Find a fact.")
    plan.function("other", "concat", params={"parts": ["no breaker here"]})
    run = client.submit(plan.build(output=["ask", "other"]))

    def breaker_spans() -> list[Span]:
        return [span for span in spans_of(client, run.run_id) if span.name == BREAKER]

    wait_until(breaker_spans, timeout=60, what="the breaker's first span")
    fake_llm.set_fault_rate(0)
    state = run.wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, workers.log_tails()

    events = breaker_spans()
    model = f"model:{settings.llm.default_model}"
    first, last = events[0], events[-1]
    assert (first.attributes["event"], first.attributes["open_for_s"]) == ("opened", 2.0)
    assert (first.status, last.status) == ("error", "ok")
    assert last.attributes == {"breaker": model, "event": "closed", "open_for_s": 0.0}
    assert len(fake_llm.requests) >= 3 and [r.status for r in fake_llm.requests[:3]] == [529] * 3
    for span in events:
        assert span.attributes["breaker"] == model and span.start == span.end
        assert (span.node, span.parent_id) == ("ask", f"ask#{span.attempt}")
        assert state.created_at <= span.start <= (state.finished_at or span.start)
    # Between opened and closed: only refusals, or probes that failed and opened it again.
    assert {span.attributes["event"] for span in events[1:-1]} <= {"refused", "opened"}
    assert all(float(s.attributes["open_for_s"]) > 0 for s in events[:-1])


# -- the services driven by hand --------------------------------------------------------------


def created_run(runtime: Runtime, *node_ids: str) -> str:
    plan = Plan.model_validate(
        {"nodes": [{"id": node, "type": "function", "function": "noop"} for node in node_ids]}
    )
    run_id = new_run_id()
    graph = validate_plan(plan, builtin_registry(), PlanLimits())
    runtime.store.create_run(run_id, graph, runtime.dispatch_for)
    return run_id


def node_context(services: RedisNodeServices, run_id: str, node_id: str) -> NodeContext:
    return NodeContext(
        run_id=run_id,
        node_id=node_id,
        attempt=1,
        fence=1,
        settings=services.runtime.settings,
        inputs={},
        services=services,
    )


class Unreachable(Exception):
    pass


def unreachable() -> None:
    raise Unreachable("connection refused")


def counts_unreachable(exc: BaseException) -> bool:
    return isinstance(exc, Unreachable)


def test_breaker_events_are_told_to_the_node_whose_call_caused_them(
    no_worker_settings: Settings,
) -> None:
    settings = no_worker_settings.model_copy(
        update={"breaker_fail_max": 2, "breaker_reset_timeout_s": 1.0}
    )

    def process() -> RedisNodeServices:  # each with its own breakers, as worker processes
        return RedisNodeServices(Runtime.from_settings(settings))

    one, other = process(), process()
    run_id = created_run(one.runtime, "a", "b")
    a, b = node_context(one, run_id, "a"), node_context(other, run_id, "b")
    assert b.guard("tool:flaky", lambda: True, counts_unreachable)  # b knows it closed

    with pytest.raises(Unreachable):  # a first failure: the breaker stays closed
        a.guard("tool:flaky", unreachable, counts_unreachable)
    with pytest.raises(BreakerOpenError):  # a's second failure opens it
        a.guard("tool:flaky", unreachable, counts_unreachable)
    with pytest.raises(BreakerOpenError):  # b is refused without calling
        b.guard("tool:flaky", lambda: pytest.fail("called through an open breaker"), bool)

    def b_gets_through() -> bool:
        try:
            return b.guard("tool:flaky", lambda: True, counts_unreachable)
        except BreakerOpenError:
            return False

    # b's probe closes it. (b's breaker learns on the way that a opened it: not b's doing.)
    wait_until(b_gets_through, timeout=10, what="the breaker half-open")

    spans = [span for span in spans_of(Client(settings), run_id) if span.name == BREAKER]
    told = [(span.node, span.attributes["event"]) for span in spans]
    assert told[:2] == [("a", "opened"), ("b", "refused")]
    assert told[-1] == ("b", "closed") and set(told[2:-1]) <= {("b", "refused")}
    assert spans[0].attributes == {"breaker": "tool:flaky", "event": "opened", "open_for_s": 1.0}
    assert 0 < float(spans[1].attributes["open_for_s"]) <= 1.0
    assert all(span.parent_id == f"{span.node}#1" and span.start == span.end for span in spans)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.sandbox
def test_a_recording_failure_never_fails_the_node(
    no_worker_settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    require_a_sandbox()
    runtime = Runtime.from_settings(no_worker_settings)
    services = RedisNodeServices(runtime)
    gone = redis.Redis(port=closed_port(), socket_connect_timeout=1)
    services.spans = SpanRecorder(gone, runtime.keys, no_worker_settings)
    ctx = node_context(services, created_run(runtime, "code"), "code")
    code = "import json, sys\nprint(json.dumps({'n': 1}))"
    with caplog.at_level(logging.WARNING, logger="dagwright.telemetry.recorder"):
        assert run_python_node(ctx, Node(id="code", type="python", code=code)) == {"n": 1}
        assert run_python_node(ctx, Node(id="code", type="python", code=code)) == {"n": 1}
    warnings = [r.getMessage() for r in caplog.records if r.name == "dagwright.telemetry.recorder"]
    assert len(warnings) == 1 and "spans are not being recorded (ConnectionError" in warnings[0]


# -- the recorder ---------------------------------------------------------------------------------


@pytest.fixture
def recorder_env(no_worker_settings: Settings) -> tuple[redis.Redis, Keys]:
    store = redis.Redis.from_url(no_worker_settings.redis.url or "", decode_responses=True)
    return store, Keys(no_worker_settings.redis.key_prefix)


def a_span(index: int = 0) -> Span:
    now = datetime.now(UTC)
    return Span(span_id=f"s{index}", name=TOOL_CALL, node="n", attempt=1, start=now, end=now)


def test_the_stream_is_capped_at_trace_maxlen(
    no_worker_settings: Settings, recorder_env: tuple[redis.Redis, Keys]
) -> None:
    store, keys = recorder_env
    store.hset(keys.run_key("r", "run"), "status", "running")
    settings = no_worker_settings.model_copy(update={"trace_maxlen": 100})
    recorder = SpanRecorder(store, keys, settings)
    for index in range(1000):
        assert recorder.record("r", a_span(index))
    # MAXLEN ~ trims whole stream nodes (100 entries each by default): at most one more node.
    assert 100 <= store.xlen(keys.run_key("r", "spans")) <= 200
    assert store.ttl(keys.run_key("r", "spans")) == -1  # running: expires when the run ends


def test_a_span_after_the_run_ended_expires_with_the_run_and_none_outlives_it(
    no_worker_settings: Settings, recorder_env: tuple[redis.Redis, Keys]
) -> None:
    store, keys = recorder_env
    recorder = SpanRecorder(store, keys, no_worker_settings)
    store.hset(keys.run_key("ended", "run"), "status", "succeeded")
    store.expire(keys.run_key("ended", "run"), 3600)  # as finish_run leaves it, no span yet
    assert recorder.record("ended", a_span())
    assert 3590 <= store.ttl(keys.run_key("ended", "spans")) <= 3600

    assert not recorder.record("gone", a_span())  # expired or deleted: no orphan stream
    assert not store.exists(keys.run_key("gone", "spans"))


def test_nothing_is_recorded_with_tracing_off(
    no_worker_settings: Settings, recorder_env: tuple[redis.Redis, Keys]
) -> None:
    store, keys = recorder_env
    store.hset(keys.run_key("r", "run"), "status", "running")
    settings = no_worker_settings.model_copy(update={"trace_enabled": False})
    assert not SpanRecorder(store, keys, settings).record("r", a_span())
    assert not store.exists(keys.run_key("r", "spans"))


# -- NodeContext.span -----------------------------------------------------------------------


def memory_context(tmp_path: Path, **settings: Any) -> tuple[NodeContext, MemoryServices]:
    services = MemoryServices(ScriptedLLM([]), tmp_path)
    return agent_context(services, settings=Settings(**settings)), services


def test_a_span_times_its_block_as_a_child_of_the_node_attempt(tmp_path: Path) -> None:
    ctx, services = memory_context(tmp_path)
    before = datetime.now(UTC)
    with ctx.span(TOOL_CALL, tool="t", skipped=None) as span:
        time.sleep(0.05)  # a block that takes time: what the span must time
        span.attributes["output_bytes"] = 3
    [recorded] = services.spans
    assert (recorded.name, recorded.node, recorded.attempt) == (TOOL_CALL, "agent", 1)
    assert recorded.parent_id == "agent#1" and recorded.status == "ok"
    assert recorded.attributes == {"tool": "t", "output_bytes": 3}
    assert before <= recorded.start and 0.05 <= recorded.duration_s < 5


def test_a_failing_block_is_an_error_span_with_its_message_redacted(tmp_path: Path) -> None:
    ctx, services = memory_context(tmp_path, anthropic_api_key=SecretStr(API_KEY))
    with pytest.raises(RuntimeError), ctx.span(SANDBOX_EXEC, backend="b"):
        raise RuntimeError(f"refused with {API_KEY}")
    with pytest.raises(ApprovalNeeded), ctx.span(TOOL_CALL):  # waiting is not failing
        raise ApprovalNeeded(Proposal("tool", "http_get"))
    failed, waiting = services.spans
    assert failed.status == "error" and failed.attributes["error"] == "RuntimeError"
    assert failed.attributes["error_message"] == "refused with ***"
    assert waiting.status == "ok" and "error" not in waiting.attributes


def test_a_span_that_cannot_be_built_is_dropped_never_raised(tmp_path: Path) -> None:
    """An attribute of another type must not fail the node, nor replace the block's error."""
    ctx, services = memory_context(tmp_path)
    with ctx.span(TOOL_CALL, tool="t") as span:
        span.attributes["items"] = [1, 2]  # type: ignore[assignment]
    with pytest.raises(KeyError), ctx.span(TOOL_CALL) as span:
        span.attributes["items"] = {"a": 1}  # type: ignore[assignment]
        raise KeyError("the block's own error")
    assert services.spans == []


def test_an_agent_s_tool_spans_say_what_the_policy_and_the_tool_did(tmp_path: Path) -> None:
    llm = ScriptedLLM(
        [
            reply(tool_use("workspace_write", "w1", path="a.md", content="abc")),
            reply(tool_use("workspace_read", "r1", path="a.md")),
            reply(text("done")),
        ]
    )
    services = MemoryServices(llm, tmp_path)
    spec = AgentSpec(
        name="t",
        description="",
        system_prompt="",
        tools=("workspace_write", "workspace_read"),
        policy=ToolPolicy.allowing("workspace_write"),
    )
    node = Node(id="agent", type="t", instruction="go")
    output = run_agent(agent_context(services), node, spec, builtin_registry().tools)
    assert output == "done"
    write, read = services.spans
    assert write.attributes["outcome"] == "ok" and write.attributes["tool_use_id"] == "w1"
    assert (read.attributes["decision"], read.attributes["outcome"]) == ("deny", "denied")


def test_a_tool_call_held_for_approval_then_rejected_has_a_span_for_each_pass(
    tmp_path: Path,
) -> None:
    asking = tool_use("workspace_write", "w1", path="a.md", content="abc")
    services = MemoryServices(ScriptedLLM([reply(asking), reply(text("done"))]), tmp_path)
    rule = PolicyRule(tool="workspace_write", action=PolicyAction.REQUIRE_APPROVAL)
    spec = AgentSpec(
        name="t",
        description="",
        system_prompt="",
        tools=("workspace_write",),
        policy=ToolPolicy(rules=[rule]),
    )
    node = Node(id="agent", type="t", instruction="go")
    tools = builtin_registry().tools
    with pytest.raises(ApprovalNeeded):
        run_agent(agent_context(services), node, spec, tools)
    now = datetime.now(UTC)
    services.approval_given = Approval(
        id="a1",
        run_id="run1",
        node="agent",
        kind="tool",
        action="workspace_write",
        args={"path": "a.md", "content": "abc"},
        tool_use_id="w1",
        requested_at=now,
        deadline=now,
        decision=ApprovalDecision(status=ApprovalStatus.REJECTED, by="alice", at=now),
    )
    resumed = agent_context(services, checkpoint=services.checkpoints[-1])
    assert run_agent(resumed, node, spec, tools) == "done"
    waited, rejected = services.spans
    assert (waited.status, waited.attributes["outcome"]) == ("ok", "awaiting_approval")
    assert (rejected.status, rejected.attributes["outcome"]) == ("error", "rejected")
    assert {waited.attributes["decision"], rejected.attributes["decision"]} == {"require_approval"}
