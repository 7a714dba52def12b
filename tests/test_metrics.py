"""Prometheus metrics: counted in Redis by the processes that see the work, served by
``dagwright metrics-server`` and by workers, read over real HTTP from real processes."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families
from redis.backoff import NoBackoff
from redis.retry import Retry

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.connection import connect
from dagwright.errors import BreakerOpenError
from dagwright.keys import Keys
from dagwright.llm.pricing import DEFAULT_MODEL_PRICES
from dagwright.metrics.server import bind_metrics_server
from dagwright.resilience import Breakers
from dagwright.sandbox.choice import choose_sandbox
from dagwright.telemetry import counters
from dagwright.telemetry.counters import Counters, node_duration
from dagwright.testing import FakeAnthropicServer
from tests.support.cli import cli_env, dagwright, one_error_line
from tests.support.llm_script import RESEARCHER, text, turn
from tests.support.processes import REPO_ROOT, Workers
from tests.support.sandboxes import require_a_sandbox
from tests.support.valkey import RestartableValkey, free_port
from tests.support.waiting import wait_until

WRITER = "You are the writer"
SONNET, HAIKU = "claude-sonnet-5-5", "claude-haiku-5-5"
Samples = dict[str, dict[frozenset[tuple[str, str]], float]]


def scrape(url: str) -> Samples:
    """Every sample of the endpoint, by sample name and label set."""
    response = httpx.get(url, timeout=10)
    assert response.status_code == 200, response.text
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[frozenset(sample.labels.items())] = sample.value
    return samples


def scrape_a_server_of(settings: Settings) -> Samples:
    """Every sample of a metrics server started on ``settings`` for one scrape."""
    server = bind_metrics_server(settings, host="127.0.0.1", port=free_port())
    server.start()
    try:
        return scrape(server.url)
    finally:
        server.stop()


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get(name, {}).get(frozenset(labels.items()))


def labelled(samples: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """A family's samples keyed by their sorted labels (for exact comparisons)."""
    return {tuple(sorted(labels)): v for labels, v in samples.get(name, {}).items()}


@contextmanager
def metrics_server_process(env: dict[str, str], port: int) -> Iterator[subprocess.Popen[str]]:
    """``dagwright metrics-server`` on ``port``, answering once this yields."""
    process = subprocess.Popen(
        [sys.executable, "-m", "dagwright", "metrics-server", "--port", str(port)],
        cwd=REPO_ROOT,
        env={**env, "DAGWRIGHT_METRICS_HOST": "127.0.0.1"},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert line.strip() == f"serving metrics at http://127.0.0.1:{port}/metrics (Ctrl-C stops)"
        yield process
    finally:
        process.terminate()
        process.wait(15)


def with_workers_online(samples: Samples) -> Samples | None:
    return samples if value(samples, "dagwright_workers_online") else None


def mixed_plan() -> PlanBuilder:
    """A function, two LLM agents (two models) and a python node in the sandbox."""
    plan = PlanBuilder("Everything the metrics count")
    brief = plan.function("brief", "concat", params={"parts": ["Topic: metrics"]})
    research = plan.agent("research", "researcher", "Collect facts.", depends_on=[brief])
    plan.agent("write", "writer", "Write it up.", depends_on=[research])
    plan.python("code", "print(1 + 2)")
    return plan


def script_agents(fake_llm: FakeAnthropicServer) -> None:
    writer_turn = turn(WRITER, 1, text("Metrics are counted in Redis."), tokens=(200, 30))
    writer_turn["reply"]["model"] = HAIKU  # what the API says it used is what is counted
    fake_llm.add(
        turn(RESEARCHER, 1, text("Counters live in Redis."), tokens=(300, 40)), writer_turn
    )


def trip_breaker(settings: Settings, name: str) -> None:
    breakers = Breakers(
        connect(settings.redis.url or "", decode_responses=False),
        Keys(settings.redis.key_prefix),
        fail_max=2,
        reset_timeout_s=settings.breakers.reset_timeout_s,
        max_probes=1,
    )

    def unreachable() -> None:
        raise ConnectionError("refused")

    for _ in range(2):
        with pytest.raises((ConnectionError, BreakerOpenError)):
            breakers.call(name, unreachable, is_failure=lambda exc: True)


def price(model: str, input_tokens: int, output_tokens: int) -> float:
    prices = DEFAULT_MODEL_PRICES[model]
    return (input_tokens * prices.input + output_tokens * prices.output) / 1_000_000


@pytest.mark.sandbox
@pytest.mark.usefixtures("worker")
def test_the_metrics_server_serves_every_family_after_runs(
    client: Client, settings: Settings, fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    require_a_sandbox()
    script_agents(fake_llm)
    assert client.submit(mixed_plan().build()).wait(timeout=60).status == RunStatus.SUCCEEDED
    broken = PlanBuilder("fails for good")
    broken.function("broken", "flaky", params={"fail_times": 5, "permanent": True})
    assert client.submit(broken.build()).wait(timeout=30).status == RunStatus.FAILED
    trip_breaker(settings, "tool:metrics-probe")

    port = free_port()
    with metrics_server_process(cli_env(settings, tmp_path), port):
        url = f"http://127.0.0.1:{port}/metrics"
        # the in-process worker announces itself every few seconds (the test emptied Redis)
        samples = wait_until(lambda: with_workers_online(scrape(url)), timeout=15)

    assert value(samples, "dagwright_up") == 1
    assert {s: value(samples, "dagwright_runs", status=s) for s in RunStatus} == {
        RunStatus.PLANNING: 0,
        RunStatus.RUNNING: 0,
        RunStatus.SUCCEEDED: 1,
        RunStatus.FAILED: 1,
        RunStatus.CANCELLED: 0,
    }
    # one attempt per node, by worker type and outcome
    assert labelled(samples, "dagwright_node_duration_seconds_count") == {
        (("outcome", "succeeded"), ("worker_type", "function")): 1,
        (("outcome", "succeeded"), ("worker_type", "researcher")): 1,
        (("outcome", "succeeded"), ("worker_type", "writer")): 1,
        (("outcome", "succeeded"), ("worker_type", "python")): 1,
        (("outcome", "failed"), ("worker_type", "function")): 1,
    }
    python_s = value(
        samples, "dagwright_node_duration_seconds_sum", worker_type="python", outcome="succeeded"
    )
    assert python_s is not None and 0 < python_s < 60
    # tokens and cost exactly as the fake API reported them, by model
    assert labelled(samples, "dagwright_llm_calls_total") == {
        (("model", SONNET),): 1,
        (("model", HAIKU),): 1,
    }
    assert labelled(samples, "dagwright_llm_tokens_total") == {
        (("kind", "input"), ("model", SONNET)): 300,
        (("kind", "output"), ("model", SONNET)): 40,
        (("kind", "input"), ("model", HAIKU)): 200,
        (("kind", "output"), ("model", HAIKU)): 30,
    }
    assert value(samples, "dagwright_llm_cost_usd_total", model=SONNET) == pytest.approx(
        price(SONNET, 300, 40)
    )
    # ... but priced as requested (the writer's model is the default, sonnet): the run's
    # budget was reserved at that price (llm/anthropic.py)
    assert value(samples, "dagwright_llm_cost_usd_total", model=HAIKU) == pytest.approx(
        price(SONNET, 200, 30)
    )
    backend = choose_sandbox(settings.sandbox).name
    assert labelled(samples, "dagwright_sandbox_executions_total") == {
        (("backend", backend), ("outcome", "ok")): 1
    }
    assert value(samples, "dagwright_dlq_depth") == 1
    breakers = labelled(samples, "dagwright_breaker_state")
    assert breakers[(("breaker", "tool:metrics-probe"),)] == 2
    # The model's and the sandbox's breakers are closed. Each is listed only if this worker
    # thread's breaker was made since the test emptied Redis (each thread registers its
    # breakers once; an earlier test module may have made them).
    assert breakers.get((("breaker", f"model:{SONNET}"),), 0) == 0
    assert breakers.get((("breaker", f"sandbox:{backend}"),), 0) == 0
    depths = labelled(samples, "dagwright_queue_depth")
    assert depths[(("queue", "dw.orchestrator"),)] == 0
    assert depths[(("queue", "dw.function"),)] == 0


def test_queue_depth_counts_the_messages_no_worker_has_taken(
    no_worker_settings: Settings,
) -> None:
    plan = PlanBuilder("three roots, nobody to run them")
    for i in range(3):
        plan.function(f"n{i}", "noop")
    run = Client(no_worker_settings).submit(plan.build())
    server = bind_metrics_server(no_worker_settings, host="127.0.0.1", port=free_port())
    server.start()
    try:
        samples = scrape(server.url)
        run.cancel()
        after_cancel = scrape(server.url)  # the same server: nothing is remembered
    finally:
        server.stop()
    depths = labelled(samples, "dagwright_queue_depth")
    assert depths[(("queue", "dw.function"),)] == 3
    assert sum(depths.values()) == 3
    assert value(samples, "dagwright_runs", status="running") == 1
    assert value(samples, "dagwright_workers_online") == 0
    assert value(after_cancel, "dagwright_runs", status="running") == 0
    assert value(after_cancel, "dagwright_runs", status="cancelled") == 1


def test_a_worker_serves_the_metrics_and_a_killed_workers_counts_survive(
    subprocess_settings: Settings, workers: Workers
) -> None:
    port = free_port()
    settings = subprocess_settings.model_copy(
        update={"metrics_port": port, "metrics_host": "127.0.0.1"}
    )
    url = f"http://127.0.0.1:{port}/metrics"
    first = workers.start(settings, concurrency=2)
    plan = PlanBuilder("two nodes")
    plan.function("a", "noop")
    plan.function("b", "noop")
    run = Client(settings).submit(plan.build())
    assert run.wait(timeout=60).status == RunStatus.SUCCEEDED, workers.log_tails()

    def succeeded_nodes() -> float | None:
        try:
            samples = scrape(url)
        except httpx.TransportError:
            return None
        return value(
            samples,
            "dagwright_node_duration_seconds_count",
            worker_type="function",
            outcome="succeeded",
        )

    assert wait_until(succeeded_nodes, timeout=30) == 2, workers.log_tails()
    first.kill_all()
    with pytest.raises(httpx.TransportError):
        httpx.get(url, timeout=5)
    workers.start(settings, concurrency=1)  # on the same port, free again
    assert wait_until(succeeded_nodes, timeout=30) == 2, workers.log_tails()


def test_with_redis_down_the_endpoint_answers_dagwright_up_0(tmp_path: Path) -> None:
    valkey = RestartableValkey(tmp_path / "valkey")
    port = free_port()
    env = cli_env(None, tmp_path / "data", DAGWRIGHT_REDIS_URL=f"redis://127.0.0.1:{valkey.port}/0")
    with metrics_server_process(env, port) as process:
        url = f"http://127.0.0.1:{port}/metrics"
        assert value(scrape(url), "dagwright_up") == 1
        valkey.stop()
        for _ in range(2):
            samples = scrape(url)
            assert value(samples, "dagwright_up") == 0
            assert "dagwright_runs" not in samples
            assert "process_cpu_seconds_total" in samples  # the process collectors still answer
    assert process.stderr is not None
    log = process.stderr.read().strip().splitlines()
    assert len(log) == 1 and "cannot read the state store" in log[0], log
    assert "Traceback" not in log[0]


@pytest.mark.subprocess
def test_a_port_in_use_is_one_error_line_and_exit_2(settings: Settings, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = cli_env(settings, tmp_path, DAGWRIGHT_METRICS_HOST="127.0.0.1")
        server = dagwright("metrics-server", "--port", str(port), env=env, timeout=60)
        worker = dagwright(
            "worker", "-c", "1", env={**env, "DAGWRIGHT_METRICS_PORT": str(port)}, timeout=60
        )
    for result in (server, worker):
        assert result.returncode == 2, result.stderr
        assert f"cannot serve metrics on 127.0.0.1:{port}" in one_error_line(result)


def test_counting_never_fails_the_work_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    nowhere = redis.Redis(port=free_port(), retry=Retry(NoBackoff(), 0))
    counters = Counters(nowhere, Keys())
    with caplog.at_level(logging.WARNING, logger="dagwright.telemetry.counters"):
        for _ in range(3):
            counters.add(node_duration("function", "succeeded", 0.01))
    assert len(caplog.records) == 1
    assert "metrics counters not recorded" in caplog.records[0].getMessage()


def test_durations_fall_in_their_bucket(redis_client: redis.Redis, settings: Settings) -> None:
    """Buckets are counted once each and made cumulative by the reader."""
    counters = Counters(redis_client, Keys(settings.redis.key_prefix))
    for seconds in (0.01, 0.3, 0.3, 7200):
        counters.add(node_duration("coder", "retrying", seconds))
    samples = scrape_a_server_of(settings)
    buckets: dict[str, Any] = {
        dict(labels)["le"]: count
        for labels, count in samples["dagwright_node_duration_seconds_bucket"].items()
    }
    assert (buckets["0.05"], buckets["0.25"], buckets["0.5"], buckets["3600.0"]) == (1, 1, 3, 3)
    assert buckets["+Inf"] == 4
    sum_ = value(
        samples, "dagwright_node_duration_seconds_sum", worker_type="coder", outcome="retrying"
    )
    assert sum_ == pytest.approx(7200.61)


def test_a_duration_sum_counts_whole_microseconds_and_adds_an_older_float_sum(
    redis_client: redis.Redis, settings: Settings
) -> None:
    """The hot path counts the sum with HINCRBY of microseconds (complete.lua); a sum in
    float seconds an older version counted is added to it."""
    keys = Keys(settings.redis.key_prefix)
    Counters(redis_client, keys).add(node_duration("coder", "succeeded", 1.25))
    older = counters.field_of(("coder", "succeeded", counters.SUM_FIELD))
    redis_client.hincrbyfloat(keys.metrics(counters.NODE_DURATION), older, 2.5)
    assert redis_client.hget(
        keys.metrics(counters.NODE_DURATION),
        counters.field_of(("coder", "succeeded", counters.SUM_US_FIELD)),
    ) in (b"1250000", "1250000")
    samples = scrape_a_server_of(settings)
    total = value(
        samples, "dagwright_node_duration_seconds_sum", worker_type="coder", outcome="succeeded"
    )
    assert total == pytest.approx(3.75)
