"""What a submit costs in round trips to Redis (state store and broker), counted at the
socket on the real code path, and which keys it writes (issue 14: many small runs)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
import redis.connection

from dagwright import Client, PlanBuilder, PlanError, Settings
from dagwright.models import Plan

MAX_ROUND_TRIPS = 6  # issue 14's bound for a submit of a long-lived client


def diamond() -> Plan:
    plan = PlanBuilder("diamond")
    a = plan.function("a", "noop")
    b = plan.function("b", "noop", depends_on=[a])
    c = plan.function("c", "noop", depends_on=[a])
    plan.function("d", "noop", depends_on=[b, c])
    return plan.build(output="d")


class RoundTrips:
    """Writes to a Redis socket (a command, or a pipeline of them) and new connections,
    made by this thread: redis-py and kombu's Redis transport both write through
    ``send_packed_command``, and read one answer per write before the next."""

    def __init__(self) -> None:
        self.commands: list[str] = []
        self.connects = 0
        self.thread = threading.get_ident()

    def __len__(self) -> int:
        return len(self.commands)


@contextmanager
def counting(monkeypatch: pytest.MonkeyPatch) -> Iterator[RoundTrips]:
    trips = RoundTrips()
    connection = redis.connection.AbstractConnection
    send, connect = connection.send_packed_command, connection.connect

    def counted_send(self: Any, command: Any, check_health: bool = True) -> None:
        if threading.get_ident() == trips.thread:
            first = command[0] if isinstance(command, list | tuple) else command
            trips.commands.append(bytes(first).split(b"\r\n")[2].decode())
        send(self, command, check_health)

    def counted_connect(self: Any) -> None:
        if threading.get_ident() == trips.thread and self._sock is None:
            trips.connects += 1
        connect(self)

    with monkeypatch.context() as patch:
        patch.setattr(connection, "send_packed_command", counted_send)
        patch.setattr(connection, "connect", counted_connect)
        yield trips


def test_a_submit_of_a_long_lived_client_takes_at_most_six_round_trips(
    no_worker_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = Client(no_worker_settings)
    client.submit(diamond())  # the first submit connects and loads the scripts
    with counting(monkeypatch) as trips:
        client.submit(diamond())
    assert trips.connects == 0
    assert len(trips) <= MAX_ROUND_TRIPS, trips.commands
    # The run indexed (index and active set, one pipeline), the run in one script, its
    # root's message and task-sent event in one pipeline, the publish confirmed. The
    # index is a step of its own: it is in another Cluster slot than the run.
    assert trips.commands == ["ZADD", "EVALSHA", "LPUSH", "ZREM"]


def test_a_keyed_submit_takes_at_most_six_round_trips(
    no_worker_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = Client(no_worker_settings)
    client.submit(diamond(), idempotency_key="warm-up")
    with counting(monkeypatch) as first:
        run = client.submit(diamond(), idempotency_key="nightly")
    with counting(monkeypatch) as repeat:
        again = client.submit(diamond(), idempotency_key="nightly")
    assert again.run_id == run.run_id
    # The claim, then the run as unkeyed (the key is in another Cluster slot than the run).
    assert first.commands == ["EVALSHA", "ZADD", "EVALSHA", "LPUSH", "ZREM"]
    assert repeat.commands == ["EVALSHA", "HMGET"]  # nothing written, nothing published
    assert max(len(first), len(repeat)) <= MAX_ROUND_TRIPS


def test_a_submit_writes_the_run_and_a_refused_one_writes_nothing(
    no_worker_settings: Settings,
) -> None:
    client = Client(no_worker_settings)
    state = redis.Redis.from_url(no_worker_settings.redis.url or "", decode_responses=True)
    with pytest.raises(PlanError):
        client.submit({"nodes": [{"id": "a", "type": "nope"}]}, idempotency_key="k")
    assert state.keys("*") == []
    run = client.submit(diamond(), idempotency_key="k")
    names = {key.removeprefix(f"dw:{{{run.run_id}}}:") for key in state.keys("*")}
    assert names == {
        *("run", "plan", "spec", "deps", "dependents", "remaining", "dispatch"),
        *("state", "fence", "attempts", "queued", "events"),  # the outbox: published
        "dw:runs",
        "dw:runs:active",
        next(key for key in names if key.startswith("dw:idempotency:")),
    }
    assert state.hgetall(f"dw:{{{run.run_id}}}:state") == {
        "a": "queued",
        "b": "pending",
        "c": "pending",
        "d": "pending",
    }
    assert state.hget(f"dw:{{{run.run_id}}}:fence", "a") == "1"
    assert state.hget(f"dw:{{{run.run_id}}}:remaining", "d") == "2"
    kinds = [fields["kind"] for _, fields in state.xrange(f"dw:{{{run.run_id}}}:events")]
    assert kinds == ["run.submitted", "node.queued"]
    assert client.status(run.run_id).counts.total == 4
