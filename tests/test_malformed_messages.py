"""Hostile input cannot take down a worker: a message it cannot read becomes a
``malformed`` dead letter (its size and labels, never its body), and the worker goes on.

The acceptance test queues the messages before a real worker subprocess starts, as a
worker restarted after such a message would find them."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
import redis

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.dlq import Classification, DeadLetter, RawMessage
from dagwright.errors import DeadLetterError
from dagwright.keys import NODE_EXECUTE_TASK, SCHEDULE_FIRE_TASK
from dagwright.orchestrator.control.dead_letter_replay import dead_letters
from dagwright.orchestrator.runtime import Runtime
from dagwright.settings import Settings
from dagwright.tasks import build_app
from dagwright.tasks.message_checks import TASK_ARGUMENTS, DeliveredMessage, malformation
from tests.support.cli import cli_env, dagwright, json_out, one_error_line
from tests.support.processes import Workers
from tests.support.raw_messages import (
    CANARY,
    RawParts,
    bz2_bomb,
    envelope,
    messages_waiting,
    push,
    queue_raw,
    task_headers,
)
from tests.support.waiting import wait_until

QUEUE = "dw.function"
GOOD_BODY = json.dumps([["run-1", "a", 1], {}, {"callbacks": None, "chain": None}]).encode()


def delivered(
    body: object = GOOD_BODY,
    headers: object = None,
    content_type: object = "application/json",
    content_encoding: object = "utf-8",
) -> DeliveredMessage:
    return DeliveredMessage(
        queue=QUEUE,
        headers=task_headers() if headers is None else headers,
        content_type=content_type,
        content_encoding=content_encoding,
        body=body,
    )


def test_a_node_message_as_dagwright_sends_it_passes() -> None:
    assert malformation(delivered()) is None
    fire = json.dumps([["nightly"], {"tick": "2026-01-01T00:00"}, {}]).encode()
    assert malformation(delivered(fire, task_headers(SCHEDULE_FIRE_TASK))) is None


@pytest.mark.parametrize(
    ("message", "says"),
    [
        (delivered(b"{}"), "not Celery protocol 2"),
        (delivered(b"null"), "not Celery protocol 2"),
        (delivered(b"[]"), "not Celery protocol 2"),
        (delivered(b"5"), "not Celery protocol 2"),
        (delivered(b"[[], {}, {}"), "not Celery protocol 2"),
        (delivered(b"[" * 100_000), "at most"),
        (delivered(b"[" * 30_000 + b"]" * 30_000), "not Celery protocol 2"),
        (delivered(content_type="application/data"), "only JSON"),
        (delivered(content_type="application/text"), "only JSON"),
        (delivered(content_encoding="binary"), "only JSON"),
        (delivered(headers=task_headers(compression="application/x-bz2")), "compressed"),
        (delivered(headers=[1]), "headers are not a map"),
        (delivered(headers={"id": "x"}), "names no dagwright task"),
        (delivered(headers=task_headers("os.system")), "names no dagwright task"),
        (delivered(headers=task_headers(timelimit="soon")), "time limits"),
        (delivered(headers={"task": NODE_EXECUTE_TASK}), "no task id"),
        (delivered(json.dumps([["r", "a"], {}, {}]).encode()), "do not fit"),
        (delivered(json.dumps([["r", "a", "1"], {}, {}]).encode()), "do not fit"),
        (delivered(json.dumps([["r", "a", True], {}, {}]).encode()), "do not fit"),
        (delivered(json.dumps([["r", "a"], {"fence": 1, "x": 2}, {}]).encode()), "do not fit"),
        (delivered(json.dumps([["r", "a", 1], {"fence": 1}, {}]).encode()), "do not fit"),
        (delivered(json.dumps([["r", "a", 1], {}, {"callbacks": [{}]}]).encode()), "callbacks"),
    ],
)
def test_a_message_of_the_wrong_shape_is_named_without_quoting_it(
    message: DeliveredMessage, says: str
) -> None:
    reason = malformation(message)
    assert reason is not None and says in reason, reason


def test_the_argument_table_matches_the_registered_tasks(settings: Settings) -> None:
    app = build_app(settings)
    for name, expected in TASK_ARGUMENTS.items():
        parameters = list(inspect.signature(app.tasks[name].run).parameters)
        assert parameters == [n for n, _ in expected.required + expected.optional], name


def test_a_malformed_dead_letter_keeps_labels_and_size_and_cannot_be_replayed(
    no_worker_settings: Settings,
) -> None:
    runtime = Runtime.from_settings(no_worker_settings)
    raw = RawMessage(
        queue=QUEUE, content_type="application/data", content_encoding="binary", body_bytes=12
    )
    entry_id = dead_letters(runtime).add_malformed(raw, "its content type is not JSON")
    letter = dead_letters(runtime).get(entry_id)
    assert letter.classification == Classification.MALFORMED
    assert letter.raw_message == raw and not letter.replayable
    assert (letter.run_id, letter.node_id, letter.worker_type) == ("", "", "function")

    client = Client(no_worker_settings)
    with pytest.raises(DeadLetterError, match="malformed message, not a node"):
        client.dlq.replay(entry_id)
    assert client.dlq.replay_all() == []  # "replay everything" leaves them out
    [refused] = client.dlq.replay_all(classification="malformed")
    assert not refused.replayed


@pytest.mark.subprocess
def test_the_dlq_commands_show_a_malformed_message_and_refuse_its_replay(
    no_worker_settings: Settings, tmp_path: Path
) -> None:
    runtime = Runtime.from_settings(no_worker_settings)
    raw = RawMessage(
        queue=QUEUE, content_type="application/json", content_encoding="utf-8", body_bytes=2
    )
    entry_id = dead_letters(runtime).add_malformed(raw, "its body is not Celery protocol 2")
    env = cli_env(no_worker_settings, tmp_path)

    [listed] = json_out(dagwright("dlq", "list", "--json", "--class", "malformed", env=env))
    assert listed["raw_message"]["body_bytes"] == 2 and listed["run_id"] == ""
    shown = dagwright("dlq", "show", entry_id, env=env)
    assert "dw.function" in shown.stdout and "2 bytes" in shown.stdout, shown.stdout
    assert f"dlq purge {entry_id}" in shown.stderr
    refused = dagwright("dlq", "replay", entry_id, env=env)
    assert refused.returncode == 2 and "not a node" in one_error_line(refused)


def four_malformed_messages() -> list[RawParts]:
    """``{}``, ``null``, a bz2 bomb (1 GiB of zeros), a body that is not JSON at all."""
    return [
        RawParts(b"{}"),
        RawParts(b"null"),
        RawParts(bz2_bomb(), headers=task_headers(compression="application/x-bz2")),
        RawParts(
            f"binary {CANARY}".encode(),
            content_type="application/data",
            content_encoding="binary",
        ),
    ]


def peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_malformed_messages_queued_before_a_worker_starts_leave_it_running(
    broker_subprocess_settings: Settings, workers: Workers
) -> None:
    """On each broker (Redis lists, RabbitMQ quorum queues)."""
    settings = broker_subprocess_settings
    queue_raw(settings.redis.broker_url or "", QUEUE, four_malformed_messages())
    worker = workers.start(settings, concurrency=1)
    client = Client(settings)

    def four_dead_letters() -> list[DeadLetter]:
        letters = client.dlq.list(classification="malformed")
        return letters if len(letters) == 4 else []

    letters = wait_until(four_dead_letters, timeout=60, what="four malformed dead letters")
    assert worker.process.poll() is None, worker.log_tail()
    assert messages_waiting(settings, QUEUE) == 0
    sizes = sorted(letter.raw_message.body_bytes for letter in letters if letter.raw_message)
    assert sizes == sorted([2, 4, len(bz2_bomb()), len(f"binary {CANARY}")])
    assert {letter.raw_message.queue for letter in letters if letter.raw_message} == {QUEUE}
    reasons = " | ".join(letter.message for letter in letters)
    assert "compressed" in reasons and "only JSON" in reasons, reasons

    plan = PlanBuilder("after the malformed ones")
    plan.function("a", "count")
    assert client.submit(plan.build()).wait(timeout=60).status == RunStatus.SUCCEEDED
    assert worker.process.poll() is None, worker.log_tail()
    assert peak_rss_bytes(worker.pid) < 512 << 20  # the bomb was never inflated
    log = worker.log_path.read_text()
    assert log.count("dropped a malformed message") == 4, worker.log_tail()
    assert CANARY not in log and "Unrecoverable" not in log
    assert CANARY not in json.dumps([letter.model_dump(mode="json") for letter in letters])


def test_items_the_transport_cannot_parse_are_dropped_and_recorded(
    subprocess_settings: Settings, workers: Workers
) -> None:
    broker = redis.Redis.from_url(subprocess_settings.redis.broker_url or "")
    headers_a_list = json.loads(envelope(b"[]", queue=QUEUE))
    headers_a_list["headers"] = [1]
    for item in (f"not json {CANARY}", "5", json.dumps(headers_a_list)):
        push(broker, QUEUE, item)
    worker = workers.start(subprocess_settings, concurrency=1)
    client = Client(subprocess_settings)

    def three_dead_letters() -> list[DeadLetter]:
        letters = client.dlq.list(classification="malformed")
        return letters if len(letters) == 3 else []

    letters = wait_until(three_dead_letters, timeout=30, what="three malformed dead letters")
    assert worker.process.poll() is None, worker.log_tail()
    assert all(letter.raw_message and letter.raw_message.body_bytes == -1 for letter in letters)
    assert CANARY not in worker.log_path.read_text()
    plan = PlanBuilder("after the unparsable ones")
    plan.function("a", "count")
    assert client.submit(plan.build()).wait(timeout=60).status == RunStatus.SUCCEEDED
