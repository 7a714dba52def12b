"""Circuit breakers whose state is shared in a real Valkey (models, tools), and redaction
of secrets."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from dagwright.connection import connect
from dagwright.errors import BreakerOpenError, ToolError
from dagwright.keys import Keys
from dagwright.redaction import known_secrets, redact
from dagwright.resilience import Breakers
from dagwright.settings import Settings
from dagwright.testing import ScriptedLLM
from dagwright.workers import WorkerRegistry
from tests.support.agents import MemoryServices, agent_context
from tests.support.settings import TEST_API_KEY
from tests.support.waiting import wait_until


class Unreachable(Exception):
    pass


class BusinessError(Exception):
    pass


def counts_unreachable(exc: BaseException) -> bool:
    return isinstance(exc, Unreachable)


@pytest.fixture
def make_breakers(no_worker_settings: Settings) -> Callable[..., Breakers]:
    """A factory of Breakers over the same Valkey: each one stands for another process.
    pybreaker stores the opening time in whole seconds, so open times here are 1-2 s."""

    def make(**overrides: float) -> Breakers:
        options: dict[str, float] = {"fail_max": 3, "reset_timeout_s": 2.0, "max_probes": 1}
        options.update(overrides)
        return Breakers(
            connect(no_worker_settings.redis.url or "", decode_responses=False),
            Keys(no_worker_settings.redis.key_prefix),
            fail_max=int(options["fail_max"]),
            reset_timeout_s=options["reset_timeout_s"],
            max_probes=int(options["max_probes"]),
        )

    return make


def fail(breakers: Breakers, name: str, times: int) -> None:
    def unreachable() -> None:
        raise Unreachable("connection refused")

    for _ in range(times):
        with pytest.raises((Unreachable, BreakerOpenError)):
            breakers.call(name, unreachable, is_failure=counts_unreachable)


def test_the_breaker_opens_after_fail_max_failures_for_every_process(
    make_breakers: Callable[..., Breakers],
) -> None:
    # an open time far above any stall of a busy machine between opening and the next call
    one, other = make_breakers(reset_timeout_s=30.0), make_breakers(reset_timeout_s=30.0)
    fail(one, "model:m", 3)
    assert one.status("model:m").state == "open"

    calls: list[int] = []
    with pytest.raises(BreakerOpenError) as opened:
        other.call("model:m", lambda: calls.append(1), is_failure=counts_unreachable)
    assert calls == []  # failed fast, without calling the dependency
    assert opened.value.breaker == "model:m"
    assert 20.0 <= opened.value.retry_after_s <= 30.0  # pybreaker keeps whole seconds
    assert other.names() == ["model:m"]


def test_business_errors_do_not_trip_the_breaker(make_breakers: Callable[..., Breakers]) -> None:
    breakers = make_breakers()

    def refused() -> None:
        raise BusinessError("no such file")

    for _ in range(10):
        with pytest.raises(BusinessError):
            breakers.call("tool:read", refused, is_failure=counts_unreachable)
    status = breakers.status("tool:read")
    assert (status.state, status.failures) == ("closed", 0)


def test_a_success_resets_the_count_of_failures_in_a_row(
    make_breakers: Callable[..., Breakers],
) -> None:
    breakers = make_breakers()
    fail(breakers, "model:m", 2)
    assert breakers.call("model:m", lambda: "ok", is_failure=counts_unreachable) == "ok"
    fail(breakers, "model:m", 2)
    assert breakers.status("model:m").state == "closed"


def wait_for_open_time_over(breakers: Breakers, name: str) -> None:
    wait_until(
        lambda: breakers.status(name).open_for_s == 0, timeout=10, what=f"{name}'s open time"
    )


def test_once_the_open_time_is_over_one_probe_goes_through_and_closes_it(
    make_breakers: Callable[..., Breakers],
) -> None:
    first, second = make_breakers(), make_breakers()
    fail(first, "model:m", 3)
    wait_for_open_time_over(first, "model:m")

    probing, release = threading.Event(), threading.Event()

    def slow_probe() -> str:
        probing.set()
        release.wait(10)
        return "back"

    results: list[str] = []
    probe = threading.Thread(
        target=lambda: results.append(
            first.call("model:m", slow_probe, is_failure=counts_unreachable)
        )
    )
    probe.start()
    assert probing.wait(10)
    with pytest.raises(BreakerOpenError):  # the probe slot is taken: wait, do not pile on
        second.call("model:m", lambda: "me too", is_failure=counts_unreachable)
    release.set()
    probe.join(10)
    assert results == ["back"]
    assert second.status("model:m").state == "closed"
    assert second.call("model:m", lambda: "me too", is_failure=counts_unreachable) == "me too"


def test_a_failed_probe_opens_the_breaker_again(make_breakers: Callable[..., Breakers]) -> None:
    breakers = make_breakers()
    fail(breakers, "model:m", 3)
    wait_for_open_time_over(breakers, "model:m")
    fail(breakers, "model:m", 1)
    status = breakers.status("model:m")
    assert status.state == "open" and status.open_for_s >= 1.0


def test_calls_through_one_breaker_run_concurrently(
    make_breakers: Callable[..., Breakers],
) -> None:
    # pybreaker holds a lock for the whole call: one instance per thread avoids that.
    breakers = make_breakers()
    inside = threading.Barrier(3, timeout=5)

    def meet() -> None:
        inside.wait()

    threads = [
        threading.Thread(
            target=lambda: breakers.call("model:m", meet, is_failure=counts_unreachable)
        )
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not inside.broken


def test_a_decoding_client_is_refused(no_worker_settings: Settings) -> None:
    client = redis.Redis.from_url(no_worker_settings.redis.url or "", decode_responses=True)
    with pytest.raises(ValueError, match="decode_responses"):
        Breakers(client, Keys(), fail_max=1, reset_timeout_s=1, max_probes=1)


def test_known_and_pattern_secrets_are_masked(no_worker_settings: Settings) -> None:
    settings = no_worker_settings.model_copy(
        update={"redis_url": "redis://:hunter2-redis@db:6379/0"}
    )
    secrets = known_secrets(settings)
    assert set(secrets) == {TEST_API_KEY, "hunter2-redis"}
    assert redact("a key", ["key"]) == "a key"  # too short to mask: it would mask words
    text = (
        "auth failed for redis://:hunter2-redis@db:6379/0 with sk-ant-api03-abcdefghijklmnopqrstuv"
        " headers={'x-api-key': 'plainvalue123', 'Authorization': 'Bearer abc.def.ghi.jkl'}"
        " password=swordfish token: t0ken-value"
    )
    masked = redact(text, secrets)
    for secret in (
        "hunter2-redis",
        "abcdefghijklmnopqrstuv",
        "plainvalue123",
        "abc.def.ghi.jkl",
        "swordfish",
        "t0ken-value",
    ):
        assert secret not in masked, masked
    assert "auth failed for redis://" in masked


def test_a_failing_tool_opens_its_breaker_and_the_node_waits_for_it(
    make_breakers: Callable[..., Breakers], tmp_path: Path
) -> None:
    registry = WorkerRegistry()

    calls: list[int] = []

    def crashing() -> str:
        calls.append(1)
        raise ConnectionError("the search backend is down")

    def missing() -> str:
        raise ToolError("no such file")

    registry.tools.register(crashing)
    registry.tools.register(missing)
    services = MemoryServices(ScriptedLLM([]), tmp_path)
    services.breakers = make_breakers()
    ctx = agent_context(services)
    for _ in range(10):  # the caller's business: the model reads it and tries otherwise
        assert registry.tools.get("missing").call(ctx, {}).is_error  # type: ignore[union-attr]
    for _ in range(2):
        outcome = registry.tools.get("crashing").call(ctx, {})  # type: ignore[union-attr]
        assert outcome.is_error and "the search backend is down" in outcome.text
    for _ in range(2):  # the third failure opens it; then it is not called at all
        with pytest.raises(BreakerOpenError, match="tool:crashing"):
            registry.tools.get("crashing").call(ctx, {})  # type: ignore[union-attr]
    assert len(calls) == 3
    assert services.breakers.status("tool:missing").state == "closed"
