"""Concurrency limits (per worker type, per run) and LLM rate limits (per model), on a real
Valkey; end to end with real workers and the fake Anthropic API, checked from its log."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.errors import InputError, LLMCallTooLargeError, LLMRateLimitedError
from dagwright.keys import Keys
from dagwright.llm import LLMRequest, LLMResponse, RateLimitedLLM
from dagwright.models import Plan, Usage
from dagwright.orchestrator.control.run_request import RunRequest
from dagwright.orchestrator.control.submission import start_run
from dagwright.orchestrator.execution.attempt import ExecutionEnv, Outcome, execute_node
from dagwright.orchestrator.execution.leases import LeaseKeeper
from dagwright.orchestrator.execution.limits import (
    Limit,
    NodeLimits,
    Slots,
    Waiter,
    publish_waiters,
)
from dagwright.orchestrator.execution.reconciler import Reconciler
from dagwright.orchestrator.execution.services import RedisNodeServices
from dagwright.orchestrator.runtime import Runtime
from dagwright.settings import LLMRateLimit, Settings
from dagwright.testing import FakeAnthropicServer
from tests.support.cli import cli_env, dagwright, json_out
from tests.support.functions import overlap_key
from tests.support.processes import Workers
from tests.support.runstate import RecordingBroker
from tests.support.waiting import wait_for_server_clock_tick, wait_until

RESEARCHER = "You are the researcher"


@pytest.fixture
def runtime(no_worker_settings: Settings) -> Runtime:
    return Runtime.from_settings(no_worker_settings)


def limits_of(runtime: Runtime, *, slot_ttl_s: float = 10.0) -> NodeLimits:
    return NodeLimits(runtime.client, runtime.keys, slot_ttl_s=slot_ttl_s, grace_s=5.0)


def slots(run: str, node: str, *limits: Limit, fence: int = 1) -> Slots:
    return Slots(run, node, fence, limits)


# -- the semaphore, on Valkey ------------------------------------------------------------


def test_a_node_takes_every_slot_it_needs_or_none(runtime: Runtime) -> None:
    limits = limits_of(runtime)
    run_limit, type_limit = Limit("run:r1", 1), Limit("type:researcher", 2)
    assert limits.acquire(slots("r1", "a", run_limit, type_limit)) is None
    # The run is full: b waits there, and takes no type slot meanwhile.
    assert limits.acquire(slots("r1", "b", run_limit, type_limit)) == "run:r1"
    holders = runtime.client.zrange(runtime.keys.limit_holders("type:researcher"), 0, -1)
    assert holders == ["r1/a@1"]
    # So another run's node gets the type's second slot.
    assert limits.acquire(slots("r2", "c", Limit("run:r2", 1), type_limit)) is None
    assert limits.acquire(slots("r3", "d", type_limit)) == "type:researcher"
    assert runtime.client.hgetall(runtime.keys.limits) == {
        "run:r1": "1",
        "run:r2": "1",
        "type:researcher": "2",
    }


def test_waiting_nodes_keep_their_place(runtime: Runtime) -> None:
    limits = limits_of(runtime)
    one = Limit("type:coder", 1)
    assert limits.acquire(slots("r", "a", one)) is None
    assert limits.acquire(slots("r", "b", one)) == "type:coder"
    assert limits.acquire(slots("r", "c", one)) == "type:coder"
    assert limits.acquire(slots("r", "b", one)) == "type:coder"  # asked again: same place
    woken = limits.release(slots("r", "a", one))
    assert woken == [Waiter("type:coder", "r", "b")]  # the first to ask, alone
    assert limits.acquire(slots("r", "c", one)) == "type:coder"  # the slot is b's
    assert limits.acquire(slots("r", "b", one)) is None
    assert limits.release(slots("r", "b", one)) == [Waiter("type:coder", "r", "c")]
    assert limits.acquire(slots("r", "c", one)) is None
    limits.release(slots("r", "c", one))
    assert runtime.client.hgetall(runtime.keys.limits) == {}  # an unused limit is forgotten
    assert not runtime.client.keys("*limits*")


def test_a_waiter_keeps_the_time_it_first_asked_when_it_moves_to_another_limit(
    runtime: Runtime,
) -> None:
    limits = limits_of(runtime)
    run, kind = Limit("run:r1", 1), Limit("type:writer", 1)
    assert limits.acquire(slots("r1", "a", run, kind)) is None
    assert limits.acquire(slots("r1", "b", run, kind)) == "run:r1"  # asks first
    wait_for_server_clock_tick(runtime.client)  # x asks strictly later than b
    assert limits.acquire(slots("r2", "x", kind)) == "type:writer"
    woken = limits.release(slots("r1", "a", run, kind))
    assert sorted(w.node_id for w in woken) == ["b", "x"]
    # b waited for its run, never for the type, but it asked before x: it goes first.
    assert limits.acquire(slots("r1", "b", run, kind)) is None
    assert limits.acquire(slots("r2", "x", kind)) == "type:writer"


def test_the_slot_of_a_holder_that_stopped_renewing_it_frees_itself(runtime: Runtime) -> None:
    limits = limits_of(runtime, slot_ttl_s=0.3)
    one = Limit("type:analyst", 1)
    assert limits.acquire(slots("r", "dead", one)) is None
    assert limits.acquire(slots("r", "next", one)) == "type:analyst"
    assert limits.wake([one]) == []
    woken = wait_until(lambda: limits.wake([one]), timeout=5, what="the slot to expire")
    assert woken == [Waiter("type:analyst", "r", "next")]
    assert limits.acquire(slots("r", "next", one)) is None


def test_a_renewed_slot_does_not_expire(runtime: Runtime) -> None:
    limits = limits_of(runtime, slot_ttl_s=0.3)
    one = Limit("type:analyst", 1)
    assert limits.acquire(slots("r", "alive", one)) is None
    for _ in range(6):
        time.sleep(0.1)  # the behaviour under test: time passes, twice the TTL, renewed
        limits.renew_held()
    assert limits.acquire(slots("r", "other", one)) == "type:analyst"


def test_waiters_whose_node_no_longer_waits_are_dropped(runtime: Runtime) -> None:
    limits = limits_of(runtime)
    one = Limit("type:coder", 1)
    assert limits.acquire(slots("r", "a", one)) is None
    assert limits.acquire(slots("gone-run", "b", one)) == "type:coder"
    assert limits.acquire(slots("gone-run", "c", one)) == "type:coder"
    broker = RecordingBroker()
    woken = limits.release(slots("r", "a", one))
    assert publish_waiters(runtime, broker, limits, woken) == 0  # no such run: both dropped
    assert broker.published == []
    assert runtime.client.hgetall(runtime.keys.limits) == {}


# -- parking, driven by hand ---------------------------------------------------------------


def execution_env(runtime: Runtime, broker: RecordingBroker) -> ExecutionEnv:
    limits = limits_of(runtime)
    leases = LeaseKeeper(runtime.machine, lease_s=10, interval_s=1, renew_also=limits.renew_held)
    services = RedisNodeServices(runtime)
    return ExecutionEnv(runtime, broker, leases, services, limits)


def test_a_node_over_its_runs_limit_is_parked_without_using_an_attempt(runtime: Runtime) -> None:
    broker = RecordingBroker()
    env = execution_env(runtime, broker)
    assert env.limits is not None
    plan = Plan.model_validate(
        {"nodes": [{"id": n, "type": "function", "function": "noop"} for n in ("a", "b")]}
    )
    run_id = start_run(runtime, broker, RunRequest(plan=plan, max_concurrent_nodes=1))
    held = slots(run_id, "a", Limit(f"run:{run_id}", 1))
    assert env.limits.acquire(held) is None  # as if a ran now

    assert execute_node(env, run_id, "b", 1) == Outcome.PARKED
    state = runtime.store.read_state(run_id).nodes["b"]
    assert (state.status, state.attempts) == ("queued", 0)
    events = [e for e in runtime.store.read_events(run_id) if e.node == "b"]
    assert [e.kind for e in events][-2:] == ["node.running", "node.parked"]
    # `status` and the progress line say what it waits on, not merely "queued".
    assert state.waiting is not None and (state.waiting.on, state.waiting.name) == (
        "slot",
        f"run:{run_id}",
    )
    assert state.waiting.describe().startswith(f"waiting for a slot of run:{run_id} (full for")
    assert set(runtime.store.waits(run_id)) == {"b"}

    broker.published.clear()
    publish_waiters(runtime, broker, env.limits, env.limits.release(held))
    assert [(n.node_id, n.fence) for n in broker.published] == [("b", 1)]
    assert execute_node(env, run_id, "b", 1) == Outcome.SUCCEEDED
    done = runtime.store.read_state(run_id).nodes["b"]
    assert (done.attempts, done.waiting) == (1, None)
    assert runtime.store.waits(run_id) == {}


def test_the_reconciler_wakes_waiters_when_a_dead_workers_slot_expires(
    runtime: Runtime,
) -> None:
    broker = RecordingBroker()
    env = execution_env(runtime, broker)
    plan = Plan.model_validate({"nodes": [{"id": "b", "type": "function", "function": "noop"}]})
    run_id = start_run(runtime, broker, RunRequest(plan=plan, max_concurrent_nodes=1))
    dead = limits_of(runtime, slot_ttl_s=0.5)  # a worker that died holding the slot
    assert dead.acquire(slots(run_id, "gone", Limit(f"run:{run_id}", 1))) is None
    assert execute_node(env, run_id, "b", 1) == Outcome.PARKED

    broker.published.clear()
    reconciler = Reconciler(runtime, broker)
    wait_until(lambda: reconciler.run_once() and broker.published, timeout=10, what="b published")
    assert [n.node_id for n in broker.published] == ["b"]
    assert execute_node(env, run_id, "b", 1) == Outcome.SUCCEEDED


def test_max_concurrent_nodes_must_be_positive(runtime: Runtime) -> None:
    plan = Plan.model_validate({"nodes": [{"id": "a", "type": "function", "function": "noop"}]})
    with pytest.raises(InputError, match="at least 1"):
        start_run(runtime, RecordingBroker(), RunRequest(plan=plan, max_concurrent_nodes=0))


# -- the LLM rate limit, on Valkey -----------------------------------------------------------


class TimedLLM:
    """Answers every request with ``tokens`` of usage after ``delay_s``; logs each call."""

    def __init__(self, tokens: int = 100, delay_s: float = 0.0) -> None:
        self.tokens = tokens
        self.delay_s = delay_s
        self.calls: list[tuple[str, float, float]] = []  # (tag, started, ended)
        self._lock = threading.Lock()

    def complete(self, request: LLMRequest) -> LLMResponse:
        started = time.time()
        time.sleep(self.delay_s)  # a slow LLM call: the behaviour under test
        with self._lock:
            self.calls.append((request.system, started, time.time()))
        return LLMResponse(
            content=[{"type": "text", "text": "ok"}],
            stop_reason="end_turn",
            model=request.model,
            usage=Usage(
                input_tokens=self.tokens // 2, output_tokens=self.tokens - self.tokens // 2
            ),
        )


def rate_limited(
    runtime: Runtime, inner: TimedLLM, limit: LLMRateLimit, *, window_s: float, max_wait_s=30.0
) -> RateLimitedLLM:
    return RateLimitedLLM(
        inner,
        runtime.client,
        runtime.keys,
        limits={"*": limit},
        window_s=window_s,
        max_wait_s=max_wait_s,
        hold_s=60,
    )


def request(tag: str = "", max_tokens: int = 100) -> LLMRequest:
    return LLMRequest(
        model="m", system=tag, messages=[{"role": "user", "content": "hi"}], max_tokens=max_tokens
    )


def test_tokens_are_counted_in_a_sliding_window_with_the_real_usage(runtime: Runtime) -> None:
    inner = TimedLLM(tokens=400)
    llm = rate_limited(runtime, inner, LLMRateLimit(tokens_per_minute=1000), window_s=1.0)
    started = time.monotonic()
    for _ in range(3):
        llm.complete(request(max_tokens=300))  # reserves ~305, counts 400 once answered
    # The third call (~305 more) had to wait for the first one's 400 to leave the window.
    assert time.monotonic() - started >= 0.8
    first_end, third_start = inner.calls[0][2], inner.calls[2][1]
    assert third_start - first_end >= 0.95
    tokens = runtime.client.hget(runtime.keys.llm_rate("m", "tokens"), "=total")
    assert tokens == "1200" or int(tokens or 0) <= 1000  # the first may have left by now


def test_calls_waiting_for_room_go_first_come_first_served(runtime: Runtime) -> None:
    inner = TimedLLM()
    llm = rate_limited(runtime, inner, LLMRateLimit(requests_per_minute=1), window_s=0.4)
    llm.complete(request("first"))
    waiters = runtime.keys.llm_rate("m", "waiters")
    threads = []
    for index, tag in enumerate(("w1", "w2", "w3")):
        thread = threading.Thread(target=llm.complete, args=(request(tag),))
        thread.start()
        threads.append(thread)
        # In line (a ticket) or served before the next caller comes: a served caller has
        # left the waiters, and "first" is the one call made before them.
        wait_until(
            lambda n=index + 1: runtime.client.zcard(waiters) + len(inner.calls) - 1 >= n,
            timeout=5,
            what=f"{tag} waiting",
        )
        # A place in line is the millisecond of the first ask: the next caller asks later.
        wait_for_server_clock_tick(runtime.client)
    for thread in threads:
        thread.join(15)
    assert [tag for tag, _, _ in inner.calls] == ["first", "w1", "w2", "w3"]
    starts = [start for _, start, _ in inner.calls]
    assert all(later - earlier >= 0.35 for earlier, later in itertools.pairwise(starts))


def test_a_waiter_that_died_loses_its_place(runtime: Runtime) -> None:
    llm = rate_limited(runtime, TimedLLM(), LLMRateLimit(requests_per_minute=5), window_s=1.0)
    now_ms = int(time.time() * 1000)
    runtime.client.zadd(runtime.keys.llm_rate("m", "waiters"), {"dead": 0})
    runtime.client.zadd(runtime.keys.llm_rate("m", "alive"), {"dead": now_ms + 300})
    started = time.monotonic()
    llm.complete(request())
    assert 0.2 <= time.monotonic() - started < 3
    assert runtime.client.zcard(runtime.keys.llm_rate("m", "waiters")) == 0


def test_a_call_that_finds_no_room_in_time_is_retryable(runtime: Runtime) -> None:
    llm = rate_limited(
        runtime, TimedLLM(), LLMRateLimit(requests_per_minute=1), window_s=5.0, max_wait_s=0.3
    )
    llm.complete(request())
    with pytest.raises(LLMRateLimitedError) as raised:
        llm.complete(request())
    assert 3 < raised.value.retry_after_s <= 5
    assert runtime.client.zcard(runtime.keys.llm_rate("m", "waiters")) == 0


def test_a_call_bigger_than_the_whole_limit_fails_for_good(runtime: Runtime) -> None:
    inner = TimedLLM()
    llm = rate_limited(runtime, inner, LLMRateLimit(tokens_per_minute=1000), window_s=1.0)
    with pytest.raises(LLMCallTooLargeError, match="could never be made"):
        llm.complete(request(max_tokens=2000))
    assert inner.calls == []


def test_models_without_a_limit_are_not_counted(runtime: Runtime) -> None:
    llm = RateLimitedLLM(
        TimedLLM(),
        runtime.client,
        Keys(runtime.keys.prefix),
        limits={"other": LLMRateLimit(requests_per_minute=1)},
        window_s=60,
        max_wait_s=0,
        hold_s=60,
    )
    for _ in range(3):
        llm.complete(request())
    assert not runtime.client.keys("*llmrate*")


# -- end to end --------------------------------------------------------------------------------


def test_a_runs_max_concurrent_nodes_holds_on_a_wide_fan_out(
    worker: Any, client: Client, redis_client: redis.Redis
) -> None:
    plan = PlanBuilder("fan out")
    for index in range(8):
        plan.function(f"n{index}", "overlap", params={"seconds": 0.3})
    handle = client.submit(plan.build(), max_concurrent_nodes=2)
    state = handle.wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED
    assert redis_client.hget(overlap_key(handle.run_id), "max") == "2"
    assert all(node.attempts == 1 for node in state.nodes.values())  # parking is free
    limits = client.runtime.keys.limits
    wait_until(lambda: not redis_client.exists(limits), timeout=10, what="the run's limit gone")


@pytest.mark.subprocess
def test_the_cli_takes_max_concurrent(
    settings: Settings, redis_client: redis.Redis, worker: Any, tmp_path: Path
) -> None:
    env = cli_env(settings, tmp_path / "data")
    result = dagwright(
        "run", "examples/plans/diamond.yaml", "--max-concurrent", "1", "--json", env=env
    )
    assert result.returncode == 0, result.stderr
    run_id = json_out(result)["run_id"]
    assert (
        redis_client.hget(
            Keys(settings.redis.key_prefix).run_key(run_id, "run"), "max_concurrent_nodes"
        )
        == "1"
    )
    refused = dagwright("run", "examples/plans/diamond.yaml", "--max-concurrent", "0", env=env)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr


def overlapping(intervals: list[tuple[float, float]]) -> int:
    """The most intervals in flight at one time."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = current = 0
    for _, step in edges:  # at equal times, an end (-1) sorts before a start
        current += step
        most = max(most, current)
    return most


def most_tokens_in_a_window(arrivals: list[tuple[float, int]], window_s: float) -> int:
    arrivals = sorted(arrivals)
    return max(
        sum(tokens for at, tokens in arrivals if start <= at < start + window_s)
        for start, _ in arrivals
    )


TYPE_LIMIT = 3
TOKENS_PER_WINDOW = 24_000
WINDOW_S = 2.0
CALL_TOKENS = (1000, 2500)  # input, output: less than the estimate (max_tokens 4096 + input)


def test_fifty_runs_at_once_never_exceed_the_concurrency_or_the_tokens_per_window(
    subprocess_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer
) -> None:
    settings = subprocess_settings.model_copy(
        update={
            "concurrency_limits": {"researcher": TYPE_LIMIT},
            "llm_rate_limits": {"*": LLMRateLimit(tokens_per_minute=TOKENS_PER_WINDOW)},
            "llm_rate_window_s": WINDOW_S,
        }
    )
    fake_llm.add(
        {
            "match": {"system_contains": RESEARCHER},
            "reply": {
                "content": [{"type": "text", "text": "Facts."}],
                "usage": {"input_tokens": CALL_TOKENS[0], "output_tokens": CALL_TOKENS[1]},
            },
            "delay_s": 0.3,
            "times": -1,
        }
    )
    for _ in range(2):  # two processes: the limits are global, not per worker
        workers.start(settings, concurrency=6, pool="threads")
    client = Client(settings)
    plan = PlanBuilder("one researcher")
    # the estimate a call reserves counts its max_tokens: 4,096 (not the researcher's
    # 16,000), so that several fit in a window at once
    plan.agent("research", "researcher", "Collect facts.", max_tokens=4096)
    started = time.monotonic()
    handles = [client.submit(plan.build()) for _ in range(50)]
    for handle in handles:
        assert handle.wait(timeout=90).status == RunStatus.SUCCEEDED, workers.log_tails()
    elapsed = time.monotonic() - started

    log = wait_until(
        lambda: all(r.answered_at for r in fake_llm.requests) and fake_llm.requests,
        timeout=10,
        what="every answer sent",
    )
    assert len(log) == 50 and all(r.status == 200 for r in log)
    in_flight = [(r.at, r.answered_at or 0.0) for r in log]
    assert 2 <= overlapping(in_flight) <= TYPE_LIMIT
    tokens = [(r.at, sum(CALL_TOKENS)) for r in log]
    assert most_tokens_in_a_window(tokens, WINDOW_S) <= TOKENS_PER_WINDOW
    # The token limit bound: 50 calls of 3,500 tokens need 7+ windows.
    assert elapsed > 7 * WINDOW_S
    limits = client.runtime.keys.limits  # the slots are freed right after each outcome
    wait_until(lambda: not client.runtime.client.exists(limits), timeout=10, what="no limit left")
