"""Completion callbacks: a real worker subprocess (its reconciler sends the webhooks), a
real receiver on loopback that is down for its first two attempts, real signatures."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from pydantic import SecretStr

from dagwright import Client, RunStatus
from dagwright.settings import Settings
from dagwright.webhooks import verify_signature
from dagwright.webhooks.sender import NO_ANSWER
from dagwright.webhooks.signing import SIGNATURE_HEADER, signature_header
from tests.support.cli import cli_env, dagwright, json_out
from tests.support.processes import REPO_ROOT, Workers
from tests.support.waiting import wait_until
from tests.support.webhook_receiver import Received, WebhookReceiver

SECRET = "whsec-test-7f3c9a1e5b"
SECRET_ENV = "DAGWRIGHT_WEBHOOK_SECRET_TEST"
FAST_RETRIES = {
    "webhook_backoff_s": 0.3,
    "webhook_backoff_max_s": 1.0,
    "webhook_max_attempts": 5,
    "webhook_timeout_s": 5.0,
}


@pytest.fixture
def hook_settings(subprocess_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Short backoff; the secret in the environment the worker inherits (never in Redis)."""
    monkeypatch.setenv(SECRET_ENV, SECRET)
    # The receivers are on loopback, which the egress filter refuses unless allow-listed:
    # the test allow-lists its own listeners, as a deployment would a private receiver.
    return subprocess_settings.model_copy(update={**FAST_RETRIES, "egress_allow": ["127.0.0.1"]})


def noop_plan(url: str, function: str = "noop") -> dict[str, object]:
    return {
        "goal": "tell a receiver",
        "nodes": [{"id": "n", "type": "function", "function": function}],
        "webhooks": [{"url": url, "secret_env": SECRET_ENV}],
    }


def every_value(client: redis.Redis) -> Iterator[str]:
    """Every key name and value in a database, whatever its type."""
    for key in client.scan_iter(count=500):
        kind = client.type(key)
        yield key
        if kind == "string":
            yield client.get(key) or ""
        elif kind == "hash":
            yield json.dumps(client.hgetall(key))
        elif kind == "list":
            yield json.dumps(client.lrange(key, 0, -1))
        elif kind == "set":
            yield json.dumps(sorted(client.smembers(key)))
        elif kind == "zset":
            yield json.dumps(client.zrange(key, 0, -1))
        elif kind == "stream":
            yield json.dumps(client.xrange(key))


def delivered(client: Client, run_id: str) -> bool:
    """Every delivery of the run answered 2xx and recorded so."""
    deliveries = client.webhooks.deliveries(run_id)
    return bool(deliveries) and all(d.state == "delivered" for d in deliveries)


def assert_signed(received: Received) -> None:
    assert verify_signature(SECRET, received.headers, received.body)
    assert not verify_signature(SECRET, received.headers, received.body + b" ")
    assert not verify_signature("another secret", received.headers, received.body)
    forged = dict(received.headers)
    timestamp = forged[SIGNATURE_HEADER].split(",")[0].removeprefix("t=")
    forged[SIGNATURE_HEADER] = f"t={timestamp},v1={'0' * 64}"
    assert not verify_signature(SECRET, forged, received.body)
    assert not verify_signature(SECRET, received.headers, received.body, now=int(timestamp) + 301)


def test_a_receiver_down_twice_gets_each_signed_end_once(
    hook_settings: Settings, workers: Workers, redis_client: redis.Redis
) -> None:
    with WebhookReceiver(down_for=2) as receiver:
        workers.start(hook_settings, pool="threads")
        client = Client(hook_settings)
        failed_only = {"url": f"{receiver.url}/failed", "on": ["failed"], "secret_env": SECRET_ENV}
        run = client.submit(noop_plan(f"{receiver.url}/plan"), webhooks=[failed_only])
        assert run.wait(timeout=60).status == RunStatus.SUCCEEDED, workers.log_tails()
        wait_until(lambda: delivered(client, run.run_id), timeout=30, what="the delivery")

        attempts = receiver.to("/plan")
        assert [r.answered for r in attempts] == [503, 503, 200]
        assert len({r.headers["Dagwright-Delivery"] for r in attempts}) == 1
        for received in attempts:
            assert_signed(received)
        body = json.loads(attempts[-1].body)
        assert body["run_id"] == run.run_id
        assert (body["status"], body["event"]) == ("succeeded", "run.succeeded")
        assert body["counts"]["succeeded"] == 1 and body["finished_at"]
        assert SECRET not in attempts[-1].body.decode()

        (delivery,) = client.webhooks.deliveries(run.run_id)  # none for the failed-only hook
        assert delivery.state == "delivered" and delivery.url == f"{receiver.url}/plan"
        assert [a.status_code for a in delivery.attempts] == [503, 503, 200]
        assert [a.attempt for a in delivery.attempts] == [1, 2, 3]
        assert receiver.to("/failed") == []
        assert not any(SECRET in value for value in every_value(redis_client))


def test_a_failed_run_tells_its_failed_hook_and_can_be_redelivered(
    hook_settings: Settings, workers: Workers, redis_client: redis.Redis, tmp_path
) -> None:
    with WebhookReceiver() as receiver:
        workers.start(hook_settings, pool="threads")
        client = Client(hook_settings)
        failed_only = {"url": f"{receiver.url}/failed", "on": ["failed"], "secret_env": SECRET_ENV}
        plan = noop_plan(f"{receiver.url}/plan", function="fail")
        run = client.submit(plan, webhooks=[failed_only])
        assert run.wait(timeout=60).status == RunStatus.FAILED
        wait_until(lambda: delivered(client, run.run_id), timeout=30, what="both deliveries")
        assert json.loads(receiver.accepted("/failed")[0].body)["event"] == "run.failed"
        assert client.dlq.list(run_id=run.run_id)  # the DLQ holds the failure, not the key
        assert not any(SECRET in value for value in every_value(redis_client))

        env = cli_env(hook_settings, tmp_path)
        listed = json_out(dagwright("webhooks", "list", run.run_id, "--json", env=env))
        assert sorted(d["url"].rsplit("/", 1)[1] for d in listed) == ["failed", "plan"]
        chosen = next(d["id"] for d in listed if d["url"].endswith("/failed"))
        again = dagwright("webhooks", "redeliver", run.run_id, chosen, "--json", env=env)
        assert [d["id"] for d in json_out(again)] == [chosen]
        wait_until(lambda: len(receiver.accepted("/failed")) == 2, timeout=30, what="redelivery")
        wait_until(lambda: delivered(client, run.run_id), timeout=30, what="its record")
        first, second = receiver.accepted("/failed")
        assert first.headers["Dagwright-Delivery"] == second.headers["Dagwright-Delivery"]
        assert_signed(second)


def test_verify_signature_checks_body_key_and_age() -> None:
    body = b'{"run_id":"r"}'
    headers = {"dagwright-signature": signature_header(SECRET, 1_000_000, body)}
    assert verify_signature(SECRET, headers, body, now=1_000_100)
    assert not verify_signature(SECRET, headers, body, now=1_000_400)
    assert not verify_signature(SECRET, headers, b'{"run_id":"x"}', now=1_000_100)
    assert not verify_signature(SECRET, {}, body)
    assert not verify_signature(SECRET, {"Dagwright-Signature": "t=abc,v1=00"}, body)


def test_a_schedule_and_the_command_line_give_their_runs_webhooks(
    hook_settings: Settings, workers: Workers, redis_client: redis.Redis, tmp_path: Path
) -> None:
    settings = hook_settings.model_copy(
        update={"webhook_secret": SecretStr(SECRET), "webhook_max_attempts": 2}
    )
    with WebhookReceiver() as receiver:
        workers.start(settings, pool="threads")
        client = Client(settings)
        plan = {"nodes": [{"id": "n", "type": "function", "function": "noop"}]}
        client.schedules.add(
            "hooked", plan=plan, every_s=3600, webhooks=[f"{receiver.url}/scheduled"]
        )
        fired = client.schedules.run_now("hooked")
        assert fired.run_id is not None
        wait_until(lambda: delivered(client, fired.run_id), timeout=60, what="its delivery")
        (received,) = receiver.accepted("/scheduled")
        assert json.loads(received.body)["run_id"] == fired.run_id
        assert_signed(received)  # with the global secret: no secret_env

        (tmp_path / "plan.json").write_text(json.dumps(plan))
        env = cli_env(settings, tmp_path)
        nowhere = f"http://127.0.0.1:{closed_port()}/down"
        started = dagwright(
            "run", str(tmp_path / "plan.json"), "--webhook", nowhere, "--json", env=env
        )
        run_id = json_out(started)["run_id"]
        wait_until(lambda: given_up(client, run_id), timeout=60, what="the delivery given up")
        (delivery,) = client.webhooks.deliveries(run_id)
        assert [a.attempt for a in delivery.attempts] == [1, 2]  # webhook_max_attempts
        assert all(a.status_code is None and a.error == NO_ANSWER for a in delivery.attempts)
        assert not any(SECRET in value for value in every_value(redis_client))


def given_up(client: Client, run_id: str) -> bool:
    deliveries = client.webhooks.deliveries(run_id)
    return bool(deliveries) and deliveries[0].state == "failed"


def closed_port() -> int:
    """A loopback port nothing listens on (connections are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_documented_verification_agrees_with_verify_signature() -> None:
    guide = (REPO_ROOT / "docs" / "client-guide.md").read_text()
    (code,) = re.findall(r"```python\n(import hashlib.*?def verify\(.*?)```", guide, re.S)
    namespace: dict[str, object] = {}
    exec(compile(code, "client-guide.md", "exec"), namespace)
    verify = namespace["verify"]
    body = b'{"run_id":"r","status":"succeeded"}'
    header = signature_header(SECRET, int(time.time()), body)
    assert verify(SECRET, header, body) is True  # type: ignore[operator]
    assert verify(SECRET, header, body + b" ") is False  # type: ignore[operator]
    assert verify(SECRET, signature_header(SECRET, int(time.time()) - 600, body), body) is False  # type: ignore[operator]
    assert verify_signature(SECRET, {SIGNATURE_HEADER: header}, body)
