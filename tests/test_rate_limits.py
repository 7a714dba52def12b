"""Rate limits per function or worker type, shared by every worker: on a real Valkey, and
end to end with two worker processes (the count is checked from the start times the
rate's own window recorded, on the server's clock)."""

from __future__ import annotations

from typing import Any

import pytest

from dagwright import Client, RunStatus
from dagwright.errors import ConfigurationError
from dagwright.models import Node, NodeStatus, Plan
from dagwright.orchestrator.execution.rates import NamedRate, RateWindows, node_rates
from dagwright.orchestrator.runtime import Runtime
from dagwright.rates import Rate
from dagwright.settings import Settings
from dagwright.workers.function_registry import FunctionRegistry
from tests.support.functions import RATE_STARTED_RATE, rate_starts_key
from tests.support.processes import Workers
from tests.support.waiting import wait_until


@pytest.fixture
def runtime(no_worker_settings: Settings) -> Runtime:
    return Runtime.from_settings(no_worker_settings)


def most_in_a_window(starts_ms: list[float], period_ms: float) -> int:
    """The most starts within any ``period_ms`` (half-open: [t, t + period))."""
    starts = sorted(starts_ms)
    return max(
        sum(1 for other in starts[i:] if other < start + period_ms)
        for i, start in enumerate(starts)
    )


def test_a_rate_refuses_the_start_past_its_count_and_says_how_long_to_wait(
    runtime: Runtime,
) -> None:
    windows = RateWindows(runtime)
    three_a_minute = [NamedRate("function:fetch_prices", Rate(3, 60))]
    assert all(windows.take(three_a_minute, f"r/n@{i}") is None for i in range(3))
    over = windows.take(three_a_minute, "r/n@4")
    assert over is not None and str(over.limit) == "function:fetch_prices (3/m)"
    # the first start leaves the window 60 s and a millisecond after it, and the wait has
    # up to a spacing (60 s / 3) of jitter: a start in the same millisecond waits 80.001 s
    assert 59 < over.wait_s <= 60.001 + 20


def test_a_node_takes_every_rate_or_none(runtime: Runtime) -> None:
    windows = RateWindows(runtime)
    function, kind = NamedRate("function:f", Rate(5, 60)), NamedRate("type:function", Rate(1, 60))
    assert windows.take([function, kind], "r/a@1") is None
    over = windows.take([function, kind], "r/b@1")
    assert over is not None and over.limit == kind
    assert runtime.client.zcard(runtime.keys.rate_window("function:f")) == 1


def test_the_setting_wins_over_a_functions_own_rate(no_worker_settings: Settings) -> None:
    settings = no_worker_settings.model_copy(
        update={"rate_limits": {"function:rate_started": "7/m", "type:function": "9/h"}}
    )
    runtime = Runtime.from_settings(settings)
    node = Node(id="a", type="function", function="rate_started")
    assert [str(rate) for rate in node_rates(runtime, node)] == [
        "function:rate_started (7/m)",
        "type:function (9/h)",
    ]
    default = Runtime.from_settings(no_worker_settings)
    assert [str(r) for r in node_rates(default, node)] == [
        f"function:rate_started ({RATE_STARTED_RATE})"
    ]


@pytest.mark.parametrize("text", ["5", "5/d", "0/s", "-1/s", "five/s", "100000000/s"])
def test_a_bad_rate_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="rate"):
        Rate.parse(text)
    with pytest.raises(ConfigurationError, match="rate_limit"):
        FunctionRegistry().register(lambda: None, "f", rate_limit=text)


def test_a_rate_limit_setting_names_a_function_or_a_type(no_worker_settings: Settings) -> None:
    with pytest.raises(ValueError, match="function:<name> or type:<worker type>"):
        Settings.model_validate({**no_worker_settings.model_dump(), "rate_limits": {"x": "1/s"}})


def test_two_workers_share_a_rate_and_a_waiting_node_holds_no_slot(
    subprocess_settings: Settings, workers: Workers
) -> None:
    for _ in range(2):  # two processes: the rate is over both, not per worker
        workers.start(subprocess_settings, concurrency=1, pool="threads")
    client = Client(subprocess_settings)
    nodes: list[dict[str, Any]] = [
        {"id": f"n{i}", "type": "function", "function": "rate_started", "params": {"group": "g"}}
        for i in range(10)
    ]
    limited = client.submit(Plan.model_validate({"goal": "ten starts", "nodes": nodes}))
    waiting = wait_until(
        lambda: [
            node.waiting
            for node in client.status(limited.run_id).nodes.values()
            if node.waiting is not None and node.waiting.on == "rate"
        ],
        timeout=60,
        what="a node waits for the rate",
    )
    assert (
        waiting[0]
        .describe()
        .startswith(f"waiting for rate limit function:rate_started ({RATE_STARTED_RATE}) until ")
    )
    # Its worker slot is free: a node of no rate runs while the limited ones still wait
    # (10 starts at 2/s take 4.5 s at least).
    other = client.submit(
        Plan.model_validate({"nodes": [{"id": "a", "type": "function", "function": "count"}]})
    )
    assert other.wait(timeout=60).status == RunStatus.SUCCEEDED, workers.log_tails()
    still = client.status(limited.run_id).nodes.values()
    assert any(node.status == NodeStatus.RETRY_WAIT for node in still)

    assert limited.wait(timeout=90).status == RunStatus.SUCCEEDED, workers.log_tails()
    starts = [float(ms) for ms in client.runtime.client.lrange(rate_starts_key("g"), 0, -1)]
    assert len(starts) == 10
    assert most_in_a_window(starts, 1000) <= 2
    state = client.status(limited.run_id)
    assert all(node.attempts == 1 for node in state.nodes.values())  # waits spent none
