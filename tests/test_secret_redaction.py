"""Secrets never leave through a tool's error: the acceptance test of the one redactor
(dagwright/redaction.py), with the real SDK against the strict fake Messages API, a real
worker and a real Valkey; then the redactor's own rules."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

import pytest
import redis
from pydantic import SecretStr

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.redaction import (
    MASK,
    RedactingFormatter,
    known_secrets,
    redact,
    redact_log_handlers,
)
from dagwright.testing import FakeAnthropicServer
from dagwright.workers.tools.base import redacted_output
from tests.support.functions import LEAKED_REDIS_PASSWORD, LEAKY, WEBHOOK_SECRET_VARIABLE
from tests.support.llm_script import call, turn
from tests.support.processes import Workers
from tests.support.settings import TEST_API_KEY

SECRETS = (TEST_API_KEY, LEAKED_REDIS_PASSWORD)


# TYPE and the read in one step: a key that expires (or is deleted by a worker still at
# work) between SCAN and the read is "none", which holds nothing, rather than a race
# between TYPE and the read of a key that is no longer there.
READ_ANY_KEY = """
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'string' then return {kind, redis.call('GET', KEYS[1])} end
if kind == 'hash' then return {kind, redis.call('HGETALL', KEYS[1])} end
if kind == 'list' then return {kind, redis.call('LRANGE', KEYS[1], 0, -1)} end
if kind == 'set' then return {kind, redis.call('SMEMBERS', KEYS[1])} end
if kind == 'zset' then return {kind, redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')} end
if kind == 'stream' then return {kind, redis.call('XRANGE', KEYS[1], '-', '+')} end
return {kind}
"""


def everything_in(client: redis.Redis) -> str:
    """Every key of a database and its whole value, whatever its type, as one text. A
    key gone by the time it is read is left out (nothing is left in it to leak); a key
    of a type this does not read fails the test."""
    dumped: dict[str, Any] = {}
    read = client.register_script(READ_ANY_KEY)
    for key in client.scan_iter():
        kind, *value = read(keys=[key])
        if kind == "none":
            continue
        if not value:
            raise AssertionError(f"{key}: a {kind} this scan does not read")
        dumped[key] = value[0]
    return json.dumps(dumped, default=str)


class VanishingKeys(redis.Redis):
    """A client whose SCAN deletes each ``vanishing*`` key right after returning it: the
    race of a key expiring between SCAN and its read, made to happen every time."""

    def scan_iter(self, *args: Any, **kwargs: Any) -> Any:
        for key in super().scan_iter(*args, **kwargs):
            if key.startswith("vanishing"):
                self.delete(key)
            yield key


def test_the_scan_reads_every_key_and_tolerates_one_vanishing(redis_client: redis.Redis) -> None:
    redis_client.set("vanishing:a", "gone before its read")
    redis_client.hset("kept:hash", "field", "a value")
    redis_client.xadd("kept:stream", {"event": "an entry"})
    redis_client.zadd("kept:zset", {"member": 1})
    vanishing = VanishingKeys(connection_pool=redis_client.connection_pool)
    text = everything_in(vanishing)
    assert "gone before its read" not in text and "vanishing" not in text
    for value in ("a value", "an entry", "member"):
        assert value in text


def assert_no_secret(where: str, text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} found in {where}"


@pytest.mark.usefixtures("worker")
def test_a_tool_error_quoting_the_api_key_leaks_it_nowhere(
    client: Client,
    fake_llm: FakeAnthropicServer,
    redis_client: redis.Redis,
    settings: Settings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="dagwright")
    # Two calls of a tool whose errors quote the key: the second is one failure too many
    # (max_tool_errors 2), so the error also reaches the node, its events and the DLQ.
    fake_llm.add(
        turn(LEAKY, 1, call("fetch_report", report="q3")),
        turn(LEAKY, 3, call("fetch_report", report="q4")),
    )
    plan = PlanBuilder()
    plan.agent("report", "leaky", "Fetch the Q3 report.")
    run = client.submit(plan.build())
    state = run.wait(timeout=60)
    assert state.status == RunStatus.FAILED

    # What the model received: the tool's error, its secrets masked.
    bodies = json.dumps([request.body for request in fake_llm.requests])
    assert len(fake_llm.requests) == 2
    assert_no_secret("the requests to the Messages API", bodies)
    [result] = fake_llm.requests[1].body["messages"][-1]["content"]
    assert result["is_error"]
    assert result["content"] == (
        f"RuntimeError: the gateway refused key {MASK} while caching 'q3' in "
        f"redis://:{MASK}@cache:6379/0"
    )

    # Everything the run left in Redis: checkpoint, events, spans, audit, node state, the
    # DLQ, the tool's breaker and its last failure; and the broker's database.
    stored = everything_in(redis_client)
    assert_no_secret("the state database", stored)
    keys = client.runtime.keys
    checkpoint = redis_client.hget(keys.run_key(run.run_id, "checkpoint"), "report")
    assert checkpoint is not None and "the gateway refused key ***" in checkpoint
    broker = redis.Redis.from_url(settings.redis.broker_url or "", decode_responses=True)
    assert_no_secret("the broker's database", everything_in(broker))

    # The node's error, the dead letter and the trace, as people read them.
    error = state.nodes["report"].error
    assert error is not None and "the last: RuntimeError: the gateway refused key ***" in (
        error.message
    )
    [letter] = client.dlq.list(run_id=run.run_id)
    assert "the gateway refused key ***" in letter.message
    assert_no_secret("the dead letter", letter.model_dump_json())
    trace = client.trace(run.run_id)
    assert any(span.name == "tool.call" for span in trace.spans)
    assert_no_secret("the trace", trace.model_dump_json())
    events = [event.model_dump(mode="json") for event in run.events(follow=False)]
    assert_no_secret("the events", json.dumps(events))

    # The logs, the failure's warning among them.
    assert any("failed" in record.getMessage() for record in caplog.records)
    assert_no_secret("the logs", caplog.text)
    assert_no_secret("the log records", "\n".join(r.getMessage() for r in caplog.records))


@pytest.mark.usefixtures("worker")
def test_a_webhook_signing_key_quoted_by_a_node_is_masked_in_its_error_and_dead_letter(
    client: Client,
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    key = "pager-signing-key-5Rw8"  # shaped like no secret pattern: only knowing it masks it
    monkeypatch.setenv(WEBHOOK_SECRET_VARIABLE, key)
    caplog.set_level(logging.INFO)
    plan = PlanBuilder()
    plan.function("quote", "quote_the_webhook_secret")
    run = client.submit(plan.build())
    state = run.wait(timeout=60)
    assert state.status == RunStatus.FAILED
    error = state.nodes["quote"].error
    assert error is not None and f"pager refused signature key {MASK}" in error.message
    [letter] = client.dlq.list(run_id=run.run_id)
    assert key not in letter.model_dump_json() and MASK in letter.message
    assert key not in everything_in(redis_client)
    assert key not in caplog.text


def test_known_secrets_are_every_credential_in_the_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = Settings(
        anthropic_api_key=SecretStr("api-key-value-1"),
        redis_url="redis://:state-pw-2@db:6379/0",
        broker_url="redis://user:broker-pw-3@mq:6379/1",
        anthropic_base_url="https://proxy:proxy-pw-4@llm.internal",
        otlp_endpoint="http://otel:otlp-pw-5@collector:4318",
        flower_basic_auth=SecretStr("admin:flower-pw-6,ops:flower-pw-7"),
        webhook_secret=SecretStr("webhook-key-8"),
    )
    monkeypatch.setenv("DAGWRIGHT_WEBHOOK_SECRET_PAGER", "pager-key-9")
    found = known_secrets(settings)
    for secret in (
        "api-key-value-1",
        "state-pw-2",
        "broker-pw-3",
        "proxy-pw-4",
        "otlp-pw-5",
        "flower-pw-6",
        "flower-pw-7",
        "webhook-key-8",
        "pager-key-9",
    ):
        assert secret in found
        assert redact(f"it said {secret}.", found) == f"it said {MASK}."


def test_a_path_is_not_taken_for_a_password() -> None:
    refusal = "invalid path '/etc/passwd': absolute paths are refused"
    assert redact(refusal) == refusal
    assert redact("db.password: hunter2") == f"db.password: {MASK}"


def test_a_long_tool_output_is_redacted_in_linear_time() -> None:
    # A run of hyphenated words is where an unbounded key prefix went quadratic.
    output = "a-" * 100_000
    started = time.process_time()  # CPU time: other processes on the machine do not count
    assert redact(output) == output
    assert time.process_time() - started < 5.0  # quadratic: minutes


def test_a_secret_across_a_tools_output_limit_is_masked_whole() -> None:
    output = "x" * 95 + TEST_API_KEY + "y" * 100
    kept = redacted_output(output, 100, (TEST_API_KEY,))
    assert kept.startswith("x" * 95 + MASK + "yy") and TEST_API_KEY[:5] not in kept
    assert kept.endswith(f"[... truncated {len(output) - 100} characters]")


def test_a_traceback_a_library_logs_in_a_worker_shows_no_secret(
    subprocess_settings: Settings, workers: Workers
) -> None:
    """The worker's log handlers redact every line, tracebacks included: a library that
    logs an exception quoting the API key or a URL's password leaks neither."""
    worker = workers.start(subprocess_settings, concurrency=1)
    builder = PlanBuilder()
    builder.function("leak", "log_a_library_failure")
    run = Client(subprocess_settings).submit(builder.build())
    assert run.wait(timeout=60).status == RunStatus.SUCCEEDED
    log = worker.log_path.read_text()
    assert "connection pool failed" in log  # logged, with the exception's message
    assert TEST_API_KEY not in log and "hunter2hunter2" not in log
    assert f"auth failed with {MASK}" in log


def test_the_redacting_formatter_masks_the_traceback_and_is_installed_once() -> None:
    logger = logging.getLogger("test.redaction")
    handler = logging.StreamHandler(stream=None)
    logger.addHandler(handler)
    try:
        redact_log_handlers(logger, [])  # as the CLI does before it has settings
        redact_log_handlers(logger, ["s3cr3t-value"])  # the worker, once it has them
        formatter = handler.formatter
        assert isinstance(formatter, RedactingFormatter)
        assert not isinstance(formatter.inner, RedactingFormatter)
        assert formatter.secrets == ("s3cr3t-value",)
        try:
            raise ValueError("token s3cr3t-value in https://u:pw123456@h/")
        except ValueError:
            record = logger.makeRecord(
                "test.redaction", logging.ERROR, __file__, 1, "failed", (), sys.exc_info()
            )
        line = formatter.format(record)
        assert "Traceback" in line and "s3cr3t-value" not in line and "pw123456" not in line
    finally:
        logger.removeHandler(handler)
