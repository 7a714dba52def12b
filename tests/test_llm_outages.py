"""No node waits for ever on a dead LLM endpoint: real worker processes, real Valkey, the
real SDK against the fake (or against a port where nothing listens).

- nothing listens at ANTHROPIC_BASE_URL: the node fails with one line naming the endpoint
  within 30 s, into the DLQ, replayable;
- the model's breaker stays open: the node waits, and says so (status, watch, the
  client), then reaches the DLQ after ``breaker_max_wait_s``; a replay succeeds once the
  API is back.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rich.console import Console

from dagwright import Client, PlanBuilder
from dagwright.cli.output import progress_line
from dagwright.cli.runview import RunView
from dagwright.models import NodeWait, RunCounts, RunStatus
from dagwright.settings import Settings
from dagwright.testing import FakeAnthropicServer
from tests.support.cli import cli_env, dagwright, json_out
from tests.support.processes import Workers
from tests.support.waiting import wait_until

UNREACHABLE = "http://127.0.0.1:1"


def one_agent(name: str) -> PlanBuilder:
    plan = PlanBuilder(name)
    plan.agent("research", "researcher", "Find it.")
    return plan


def rendered(view: RunView) -> str:
    console = Console(record=True, width=240)
    console.print(view.render(40, time.time()))
    return console.export_text()


def test_an_unreachable_endpoint_fails_each_node_with_one_line_within_30_s(
    subprocess_settings: Settings,
    workers: Workers,
    fake_llm: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    settings = subprocess_settings.model_copy(
        update={
            "anthropic_base_url": UNREACHABLE,
            "llm_max_attempts": 3,
            "llm_retry_backoff_s": 0.5,
            "breaker_fail_max": 2,  # refused connections do not open it: no node waits
        }
    )
    workers.start(settings)
    client = Client(settings)
    plan = PlanBuilder("unreachable")
    for i in range(3):
        plan.agent(f"research{i}", "researcher", f"Find fact {i}.")
    started = time.monotonic()
    run = client.submit(plan.build())
    state = run.wait(timeout=30)
    assert time.monotonic() - started < 30
    assert state.status == RunStatus.FAILED, workers.log_tails()
    for node in state.nodes.values():
        assert node.error is not None and node.error.error_class == "LLMEndpointUnreachableError"
        assert "\n" not in node.error.message
        assert node.error.message.startswith(
            f"the Anthropic API at {UNREACHABLE} is unreachable (connection refused) "
            "after 3 attempts in "
        ), node.error.message
    letters = client.dlq.list(run_id=run.run_id)
    assert len(letters) == 3
    assert {letter.error_class for letter in letters} == {"LLMEndpointUnreachableError"}

    status = dagwright("status", run.run_id, env=cli_env(settings, tmp_path))
    assert "is unreachable (connection refused)" in status.stdout + status.stderr

    # The endpoint fixed (workers restarted with the right one): the dead letters replay.
    workers.stop_all()
    fake_llm.add({"reply": {"content": [{"type": "text", "text": "Found it."}]}, "times": -1})
    workers.start(subprocess_settings)
    assert len(client.dlq.replay_all(run_id=run.run_id)) == 3
    state = run.wait(timeout=30)
    assert state.status == RunStatus.SUCCEEDED, workers.log_tails()


def test_a_node_waits_visibly_on_an_open_breaker_then_is_dead_lettered_and_replayed(
    subprocess_settings: Settings,
    workers: Workers,
    fake_llm: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    settings = subprocess_settings.model_copy(
        update={
            "breaker_fail_max": 2,
            "breaker_reset_timeout_s": 3.0,
            "llm_max_attempts": 2,
            # long enough for a `dagwright status` process to start on a loaded machine
            # while the node still waits (8 s was not: the node was dead-lettered first)
            "breaker_max_wait_s": 30.0,
        }
    )
    breaker = f"model:{settings.llm.default_model}"
    fake_llm.add({"reply": {"content": [{"type": "text", "text": "Found it."}]}, "times": -1})
    fake_llm.set_fault_rate(1.0, (529,), seed=1)
    workers.start(settings)
    client = Client(settings)
    run = client.submit(one_agent("breaker stays open").build())

    wait_until(  # (before the worker is up, the node waits for a worker)
        lambda: {w.on for w in client.waits(run.run_id).values()} == {"breaker"},
        timeout=30,
        what="the node waiting on its breaker",
    )
    wait = client.waits(run.run_id)["research"]
    assert (wait.on, wait.name) == ("breaker", breaker)
    assert wait.last_failure == (
        "LLMUnavailableError: the Anthropic API answered 529: fake-anthropic: injected fault 529"
    )
    node = client.status(run.run_id).nodes["research"]
    assert node.waiting is not None and node.waiting.name == breaker
    watched = rendered(RunView(client.status(run.run_id)))
    assert f"research · waiting on breaker {breaker}, open " in watched
    assert "last error" in watched
    env = cli_env(settings, tmp_path)
    shown = json_out(dagwright("status", run.run_id, "--json", env=env))
    assert shown["nodes"]["research"]["waiting"]["description"].startswith(
        f"waiting on breaker {breaker}, open "
    )

    wait_until(
        lambda: client.status(run.run_id).status.is_final,
        timeout=60,
        what=f"the run to fail: {workers.log_tails()}",
    )
    state = client.status(run.run_id)
    assert state.status == RunStatus.FAILED, workers.log_tails()
    error = state.nodes["research"].error
    assert error is not None and error.error_class == "BreakerWaitExpiredError"
    assert f"waiting 30 s on the open circuit breaker '{breaker}'" in error.message
    [letter] = client.dlq.list(run_id=run.run_id)
    assert letter.classification == "transient"

    fake_llm.set_fault_rate(0)  # the API is back
    replayed = dagwright("dlq", "replay", letter.id, env=env)
    assert replayed.returncode == 0, replayed.stderr
    state = run.wait(timeout=30)
    assert state.status == RunStatus.SUCCEEDED, workers.log_tails()
    assert state.result == "Found it."


def test_the_run_progress_line_names_what_a_node_waits_on() -> None:
    now = datetime.now(UTC)
    wait = NodeWait(
        on="breaker",
        name="model:claude-sonnet-5-5",
        since=now - timedelta(seconds=5),
        until=now + timedelta(seconds=25.4),
        last_failure="LLMUnavailableError: the Anthropic API answered 529",
    )
    line = progress_line("r1", RunStatus.RUNNING, RunCounts(total=2), 3.0, {"a": wait, "b": wait})
    assert line.endswith(
        " · a waiting on breaker model:claude-sonnet-5-5, open 25 s more: last error "
        "LLMUnavailableError: the Anthropic API answered 529 (+1 more waiting)"
    )


def test_a_slow_streamed_generation_succeeds_without_touching_the_breaker(
    subprocess_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer
) -> None:
    # ~34 events 0.1 s apart: over 3 s in all, six idle timeouts, with never 0.5 s of silence.
    settings = subprocess_settings.model_copy(
        update={"llm_idle_timeout_s": 0.5, "breaker_fail_max": 1}
    )
    long_text = "word " * 60
    fake_llm.add(
        {
            "reply": {"content": [{"type": "text", "text": long_text}]},
            "stream": {"event_delay_s": 0.1, "chunk_chars": 10},
        }
    )
    workers.start(settings)
    client = Client(settings)
    state = client.submit(one_agent("slow model").build()).wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, workers.log_tails()
    assert state.result.strip() == long_text.strip()
    assert len(fake_llm.requests) == 1 and state.nodes["research"].attempts == 1
    status = client.runtime.breakers.status(f"model:{settings.llm.default_model}")
    assert (status.state, status.failures) == ("closed", 0)


def test_a_stalled_stream_fails_the_node_within_its_bounds(
    subprocess_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer
) -> None:
    settings = subprocess_settings.model_copy(
        update={"llm_idle_timeout_s": 0.5, "llm_max_attempts": 2}
    )
    fake_llm.add(
        {
            "reply": {"content": [{"type": "text", "text": "never finished"}]},
            "stream": {"event_delay_s": 30.0},
            "times": -1,
        }
    )
    workers.start(settings)
    client = Client(settings)
    plan = PlanBuilder("stalled model")
    plan.agent("research", "researcher", "Find it.", retry={"max_attempts": 1})
    started = time.monotonic()
    state = client.submit(plan.build()).wait(timeout=30)
    assert time.monotonic() - started < 15
    assert state.status == RunStatus.FAILED, workers.log_tails()
    error = state.nodes["research"].error
    assert error is not None and error.error_class == "LLMUnavailableError"
    assert "stalled" in error.message
    assert len(fake_llm.requests) == 2
