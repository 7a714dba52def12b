"""Node logs: what a node attempt prints and logs, kept per attempt (bounded, redacted),
read back by the client, ``dagwright logs`` and the HTTP API; worker log lines name the
attempt they were made in. Real workers (threads in this process, prefork subprocesses),
real Valkey."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import redis

from dagwright import AsyncClient, Client, PlanBuilder, Settings
from dagwright.errors import InputError, UnknownNodeError, UnknownRunError
from dagwright.models import NodeLogLine, RetryPolicy, RunStatus
from dagwright.orchestrator.runtime import Runtime
from dagwright.telemetry.node_logs import AttemptLog, LogLimits, capturing
from dagwright.testing import FakeAnthropicServer
from tests.support.api_server import ApiServer
from tests.support.cli import cli_env, dagwright, one_error_line
from tests.support.functions import release_key
from tests.support.llm_script import RESEARCHER, call, text, turn
from tests.support.processes import REPO_ROOT, Workers, settings_env
from tests.support.runstate import claim, finish, start
from tests.support.sandboxes import require_a_sandbox
from tests.support.waiting import wait_until
from tests.test_api_openapi import assert_served_as_documented, document

SECRET = "hunter2-very-secret-value"


def chatter_plan(**params: Any) -> Any:
    plan = PlanBuilder("chatter")
    plan.function(
        "talk", "chatter", params=params, retry=RetryPolicy(max_attempts=3, backoff_s=0.1)
    )
    return plan.build()


def texts(lines: list[NodeLogLine], source: str | None = None) -> list[str]:
    return [line.text for line in lines if source is None or line.source == source]


def ran(client: Client, plan: Any, timeout: float = 60) -> str:
    run_id = client.submit(plan).run_id
    assert client.wait(run_id, timeout=timeout).status == RunStatus.SUCCEEDED
    return run_id


# -- capture, without a worker -----------------------------------------------------------


@pytest.fixture
def runtime(no_worker_settings: Settings) -> Runtime:
    return Runtime.from_settings(no_worker_settings)


def attempt_log(runtime: Runtime, run_id: str, node: str, **limits: Any) -> AttemptLog:
    bounds = LogLimits(**{"max_bytes": 65536, "max_line_chars": 2000, **limits})
    sink = lambda lines: runtime.node_logs.append(run_id, lines)  # noqa: E731
    return AttemptLog(run_id, node, 1, bounds, sink)


def test_an_attempt_keeps_its_prints_and_records_and_no_other_threads(runtime: Runtime) -> None:
    run_id, _ = start(runtime, [{"id": "a"}])
    others_printed = threading.Event()

    def another_node() -> None:  # its own context: nothing of it is kept as a's
        print("not a's line")
        logging.getLogger("tests.other").warning("not a's record")
        others_printed.set()

    with capturing(attempt_log(runtime, run_id, "a")):
        print("first", end="")
        print(" line")
        print("oops", file=sys.stderr)
        logging.getLogger("tests.mine").warning("a record %d", 7)
        threading.Thread(target=another_node).start()
        assert others_printed.wait(10)
    lines = Client(runtime.settings).logs(run_id)
    assert [(line.source, line.text) for line in lines] == [
        ("stdout", "first line"),
        ("stderr", "oops"),
        ("log", "a record 7"),
    ]
    assert lines[2].level == "WARNING" and lines[2].logger == "tests.mine"
    assert all((line.node, line.attempt, line.run_id) == ("a", 1, run_id) for line in lines)
    print("after the attempt")  # not kept: no attempt runs here
    assert len(Client(runtime.settings).logs(run_id)) == 3


def test_an_attempts_logs_are_bounded_cut_and_redacted(runtime: Runtime) -> None:
    run_id, _ = start(runtime, [{"id": "a"}])
    log = attempt_log(runtime, run_id, "a", max_bytes=300, max_line_chars=100, secrets=(SECRET,))
    with capturing(log):
        print(f"the password is {SECRET}; api_key=sk-ant-abcdefghijklmnopqrstuvwxyz")
        print("x" * 500)
        for i in range(100):
            print(f"line {i}")
    lines = Client(runtime.settings).logs(run_id)
    first, long, *rest = texts(lines)
    assert SECRET not in first and "abcdefghijklmnop" not in first and "***" in first
    assert long == "x" * 100 + "…"
    assert rest[-1].startswith("… truncated ") and rest[-1].endswith(" bytes")
    assert int(rest[-1].split()[2]) > 0
    assert rest[:-1] == [f"line {i}" for i in range(len(rest) - 1)]  # the first ones kept
    assert sum(len(text.encode()) + 1 for text in texts(lines)[:-1]) <= 300


def test_reads_page_by_cursor_and_refuse_unknown_runs_nodes_and_cursors(
    runtime: Runtime,
) -> None:
    run_id, _ = start(runtime, [{"id": "a"}, {"id": "b"}])
    for node in ("a", "b"):
        with capturing(attempt_log(runtime, run_id, node)):
            for i in range(3):
                print(f"{node}{i}")
    client = Client(runtime.settings)
    assert texts(client.logs(run_id, "b")) == ["b0", "b1", "b2"]
    page = client.logs(run_id, limit=2)
    assert texts(page) == ["a0", "a1"]
    assert texts(client.logs(run_id, after=page[-1].id)) == ["a2", "b0", "b1", "b2"]
    assert client.logs(run_id, "a", after=client.logs(run_id)[-1].id) == []
    with pytest.raises(UnknownRunError):
        client.logs("0" * 20)
    with pytest.raises(UnknownNodeError):
        client.logs(run_id, "nope")
    with pytest.raises(InputError, match="a cursor is a line's id"):
        client.logs(run_id, after="latest")
    with pytest.raises(InputError, match="a cursor is a line's id"):
        client.logs(run_id, after="3-41454991490929467513")  # past 2^64 - 1: no stream id


def test_a_replay_that_reopens_the_run_keeps_its_logs_until_it_ends_again(
    runtime: Runtime,
) -> None:
    from dagwright.dlq import DeadLetterFilter
    from dagwright.models import ErrorInfo
    from dagwright.orchestrator.control.dead_letter_replay import dead_letters
    from dagwright.orchestrator.runstate.machine import Replayed

    run_id, _ = start(runtime, [{"id": "a"}])
    claim(runtime, run_id, "a")
    with capturing(attempt_log(runtime, run_id, "a")):
        print("the first attempt")
    runtime.machine.fail(run_id, "a", 1, ErrorInfo(error_class="E", message="m", retryable=False))
    runtime.forget_active(run_id)
    logs_key = runtime.keys.run_logs(run_id)
    assert runtime.client.pttl(logs_key) > 0
    [letter] = dead_letters(runtime).find(DeadLetterFilter(run_id=run_id))
    assert isinstance(runtime.machine.replay(run_id, "a", 1, entry_id=letter.id), Replayed)
    assert runtime.client.pttl(logs_key) == -1  # open again: kept as long as the run
    finish(runtime, run_id, "a", fence=2)
    runtime.forget_active(run_id)
    assert runtime.client.pttl(logs_key) > 0
    assert texts(Client(runtime.settings).logs(run_id)) == ["the first attempt"]


def test_the_asyncio_client_reads_the_same_lines(runtime: Runtime) -> None:
    run_id, _ = start(runtime, [{"id": "a"}])
    with capturing(attempt_log(runtime, run_id, "a")):
        print("one\ntwo")

    async def read() -> list[NodeLogLine]:
        async with AsyncClient(runtime.settings) as client:
            return await client.logs(run_id, "a", limit=1)

    assert asyncio.run(read()) == Client(runtime.settings).logs(run_id, limit=1)


def test_the_logs_expire_with_the_run(runtime: Runtime) -> None:
    run_id, _ = start(runtime, [{"id": "a"}])
    with capturing(attempt_log(runtime, run_id, "a")):
        print("kept while the run is open")
    logs_key = runtime.keys.run_logs(run_id)
    assert runtime.client.pttl(logs_key) == -1
    assert finish(runtime, run_id, "a").run_finished == RunStatus.SUCCEEDED
    runtime.forget_active(run_id)
    run_ttl = runtime.client.pttl(runtime.keys.run_key(run_id, "run"))
    assert 0 < runtime.client.pttl(logs_key) <= run_ttl
    with capturing(attempt_log(runtime, run_id, "a")):
        print("a late line")  # written after the end: it takes the run's time to live too
    assert 0 < runtime.client.pttl(logs_key) <= run_ttl
    runtime.client.delete(runtime.keys.run_key(run_id, "run"))  # the run expired
    length = runtime.client.xlen(logs_key)
    assert runtime.node_logs.append(run_id, ['{"never": "kept"}']) is False
    assert runtime.client.xlen(logs_key) == length


# -- real workers ---------------------------------------------------------------------


def test_a_function_nodes_prints_and_logs_reach_its_logs_redacted(
    client: Client, worker: object
) -> None:
    run_id = ran(client, chatter_plan(lines=3, secret=SECRET))
    lines = client.logs(run_id, "talk")
    assert texts(lines, "stdout") == [
        "hello from talk attempt 1",
        "line 1 of talk",
        "line 2 of talk",
    ]
    assert texts(lines, "stderr") == ["to stderr from talk"]
    info, record = [line for line in lines if line.logger == "tests.chatter"]
    assert (info.level, info.text) == ("INFO", "working on talk")
    assert record.text == "logged by talk with api_key=***" and record.level == "WARNING"
    assert all(SECRET not in line.text for line in client.logs(run_id))


def test_a_retried_node_shows_each_attempts_lines(client: Client, worker: object) -> None:
    run_id = ran(client, chatter_plan(fail_times=1))
    lines = client.logs(run_id, "talk")
    assert texts(lines, "stdout") == ["hello from talk attempt 1", "hello from talk attempt 2"]
    assert sorted({line.attempt for line in lines}) == [1, 2]
    failed = [line for line in lines if line.attempt == 1 and "fails on purpose" in line.text]
    assert failed and failed[0].level == "WARNING"  # the worker's own line about the attempt


def test_the_api_serves_a_runs_logs_a_page_at_a_time(api: ApiServer, worker: object) -> None:
    run_id = ran(api.client, chatter_plan(lines=2))
    with api.http("read") as http:
        page = http.get(f"/api/v1/runs/{run_id}/logs", params={"node": "talk", "limit": 1})
        assert page.status_code == 200, page.text
        body = page.json()
        [first] = body["lines"]
        assert first["text"] == "hello from talk attempt 1" and first["source"] == "stdout"
        assert body["after"] == first["id"] and first["attempt"] == 1 and first["node"] == "talk"
        rest = http.get(f"/api/v1/runs/{run_id}/logs", params={"after": body["after"]}).json()
        assert [line["text"] for line in rest["lines"]][:1] == ["line 1 of talk"]
        whole = http.get(f"/api/v1/runs/{run_id}/logs").json()
        assert {line["source"] for line in whole["lines"]} == {"stdout", "stderr", "log"}
        assert_served_as_documented(document(api), "/api/v1/runs/{run_id}/logs", whole)
        unknown = http.get(f"/api/v1/runs/{run_id}/logs", params={"node": "nope"})
        assert unknown.status_code == 404 and "has no node 'nope'" in unknown.json()["detail"]
        bad = http.get(f"/api/v1/runs/{run_id}/logs", params={"after": "x"})
        assert bad.status_code == 422
        # a part past 2^64 - 1 is no id Redis takes: refused before it is read (was a 500)
        huge = http.get(f"/api/v1/runs/{run_id}/logs", params={"after": "3-41454991490929467513"})
        assert huge.status_code == 422, huge.text
        assert http.get(f"/api/v1/runs/{'0' * 20}/logs").status_code == 404
    with api.http(None) as anonymous:
        assert anonymous.get(f"/api/v1/runs/{run_id}/logs").status_code == 401


# -- prefork worker subprocesses and the CLI -----------------------------------------------


@pytest.fixture
def prefork(workers: Workers, subprocess_settings: Settings) -> Workers:
    """A prefork worker logging warnings and up, as the embedded stack's do."""
    workers.start(subprocess_settings, concurrency=2, args=("--loglevel", "WARNING"))
    return workers


def test_a_prefork_workers_log_lines_name_the_run_and_node(
    prefork: Workers, subprocess_settings: Settings, tmp_path: Path
) -> None:
    client = Client(subprocess_settings)
    run_id = ran(client, chatter_plan(lines=2), timeout=90)
    lines = client.logs(run_id, "talk")  # each once: print's redirection to the log is not kept
    assert texts(lines, "stdout") == ["hello from talk attempt 1", "line 1 of talk"]
    assert texts(lines, "stderr") == ["to stderr from talk"]
    assert [line.text for line in lines if line.logger == "tests.chatter"] == [
        "working on talk",  # an INFO record, kept though the worker logs WARNING and up
        "logged by talk",
    ]
    worker_log = wait_until(
        lambda: "logged by talk" in prefork[0].log_tail(200) and prefork[0].log_tail(200),
        timeout=10,
        what="the worker's log line",
    )
    [line] = [line for line in worker_log.splitlines() if "logged by talk" in line]
    assert f"[run={run_id} node=talk] logged by talk" in line
    assert "working on talk" not in worker_log  # its own log as quiet as it was


def test_dagwright_logs_prints_lines_within_80_columns_and_as_json(
    prefork: Workers, subprocess_settings: Settings, tmp_path: Path
) -> None:
    client = Client(subprocess_settings)
    run_id = ran(client, chatter_plan(lines=2, fail_times=1), timeout=90)
    env = cli_env(subprocess_settings, tmp_path, COLUMNS="80")
    shown = dagwright("logs", run_id, env=env)
    assert shown.returncode == 0, shown.stderr
    printed = shown.stdout.splitlines()
    assert printed and all(len(line) <= 80 for line in printed), printed
    assert any(line.endswith("talk#1 out   hello from talk attempt 1") for line in printed)
    assert any(line.endswith("talk#2 out   hello from talk attempt 2") for line in printed)
    assert any("talk#2 WARN  logged by talk" in line for line in printed)
    only = dagwright("logs", run_id, "talk", "--json", env=env)
    lines = [NodeLogLine.model_validate_json(line) for line in only.stdout.splitlines()]
    assert lines == client.logs(run_id, "talk")
    unknown = dagwright("logs", run_id, "nope", env=env)
    assert unknown.returncode == 2 and "has no node 'nope'" in one_error_line(unknown)
    missing = dagwright("logs", "0" * 20, env=env)
    assert missing.returncode == 2 and "no run" in one_error_line(missing)


def test_dagwright_logs_follows_a_running_node_to_the_runs_end(
    prefork: Workers, subprocess_settings: Settings, tmp_path: Path
) -> None:
    client = Client(subprocess_settings)
    run_id = client.submit(chatter_plan(lines=3, held=True)).run_id
    follower = subprocess.Popen(
        [sys.executable, "-m", "dagwright", "logs", run_id, "talk", "-f", "--timeout", "90"],
        cwd=REPO_ROOT,
        env={**settings_env(subprocess_settings), "COLUMNS": "80"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout is not None
        first = follower.stdout.readline()  # shown while the node is held, running
        assert first.rstrip().endswith("out   hello from talk attempt 1"), first
        assert client.counts(run_id)[0] == RunStatus.RUNNING
        redis.Redis.from_url(subprocess_settings.redis.url or "").set(release_key(run_id), 1)
        out, err = follower.communicate(timeout=90)
    finally:
        follower.kill()
    assert follower.returncode == 0, err
    assert [line.split(" out   ")[-1] for line in out.splitlines() if " out " in line] == [
        "line 1 of talk",
        "line 2 of talk",
    ]
    assert f"run {run_id} ended: succeeded" in err


@pytest.mark.sandbox
def test_a_python_nodes_stderr_from_its_sandbox_reaches_its_logs(
    client: Client, worker: object
) -> None:
    require_a_sandbox()
    plan = PlanBuilder("stderr in the sandbox")
    plan.python("code", "import sys\nprint('progress 1/2', file=sys.stderr)\nprint('done')\n")
    run_id = ran(client, plan.build())
    assert texts(client.logs(run_id, "code"), "stderr") == ["progress 1/2"]


def test_an_agents_llm_and_tool_calls_are_in_its_logs_without_the_prompts(
    client: Client, fake_llm: FakeAnthropicServer, worker: object
) -> None:
    fake_llm.add(
        turn(RESEARCHER, 1, text("Reading."), call("read_input", node="brief"), tokens=(300, 40)),
        turn(RESEARCHER, 3, text("Streams are append-only logs."), tokens=(500, 60)),
    )
    plan = PlanBuilder("Research Redis streams")
    brief = plan.function("brief", "concat", params={"parts": ["Topic: Redis streams"]})
    plan.agent("research", "researcher", "Collect facts on the topic.", depends_on=[brief])
    run_id = ran(client, plan.build())
    lines = client.logs(run_id, "research")
    events = [line.text for line in lines if line.logger == "dagwright.workers.agent_loop"]
    model = fake_llm.requests[0].body["model"]
    assert events[:3] == [
        f"LLM call 1 done: {model}, 300 input + 40 output tokens, stop_reason tool_use",
        "tool call read_input: ok",
        f"LLM call 2 done: {model}, 500 input + 60 output tokens, stop_reason end_turn",
    ]
    assert not any("Topic: Redis streams" in line.text for line in lines)  # no prompt text


def test_an_agents_llm_retries_are_in_its_logs(
    client: Client, fake_llm: FakeAnthropicServer, worker: object
) -> None:
    fake_llm.add(
        {"status": 429, "headers": {"retry-after": "0"}},
        {"status": 529},
        turn(RESEARCHER, 1, text("Found it.")),
    )
    plan = PlanBuilder("Find it")
    plan.agent("research", "researcher", "Find it.")
    run_id = ran(client, plan.build())
    retries = [
        line.text for line in client.logs(run_id) if line.logger == "dagwright.llm.anthropic"
    ]
    assert [text.split(" (")[0] for text in retries] == [
        "LLM call attempt 1 failed",
        "LLM call attempt 2 failed",
    ]
    assert "RateLimitError" in retries[0] and "retrying in" in retries[0]
