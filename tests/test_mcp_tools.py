"""MCP tools end to end, against real MCP servers published on PyPI (``mcp-server-time``,
``mcp-server-git``, started over stdio as a user would), real worker processes, a real
Valkey and the strict fake Messages API: a call the policy allows runs and is audited, one
it denies is refused and audited, a server killed between two calls of a node is
restarted and the node still succeeds."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.settings import Settings
from dagwright.telemetry.spans import MCP_RESTART, TOOL_CALL
from dagwright.testing import FakeAnthropicServer
from tests.support.cli import cli_env, dagwright, json_out
from tests.support.llm_script import RESEARCHER, call, text, turn
from tests.support.processes import Workers
from tests.support.waiting import wait_until

TIME_SERVER = {
    "command": sys.executable,
    "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
}
CONVERT = "mcp__time__convert_time"
CURRENT = "mcp__time__get_current_time"
NOON_IN_TOKYO = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}


def turn_after(result: str, messages: int, *blocks: dict[str, Any]) -> dict[str, Any]:
    """The researcher's answer to ``messages`` messages, given only if the last one (the
    tool results) contains ``result``."""
    entry = turn(RESEARCHER, messages, *blocks)
    entry["match"]["last_user_contains"] = result
    return entry


def with_time_server(settings: Settings, rules: list[dict[str, Any]]) -> Settings:
    """``settings`` with the time server attached to the researcher, under ``rules``."""
    return Settings(
        **{
            **settings.model_dump(),
            "mcp_servers": {"time": TIME_SERVER},
            "agent_mcp": {"researcher": {"servers": ["time"], "rules": rules}},
        }
    )


def research_run(client: Client) -> str:
    plan = PlanBuilder()
    plan.agent("clock", "researcher", "What time is noon UTC in Tokyo?")
    return client.submit(plan.build()).run_id


def test_an_allowed_mcp_tool_answers_and_a_denied_one_is_refused_both_audited(
    subprocess_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    settings = with_time_server(subprocess_settings, [{"tool": CONVERT, "action": "allow"}])
    fake_llm.add(
        turn(RESEARCHER, 1, call(CONVERT, **NOON_IN_TOKYO)),
        # Answered only if the server's result reached the model: 12:00 UTC is 21:00 there.
        turn_after("21:00", 3, call(CURRENT, timezone="UTC")),
        turn_after("refused by the tool policy", 5, text("Noon UTC is 21:00 in Tokyo.")),
    )
    workers.start(settings, concurrency=1)
    client = Client(settings)
    run_id = research_run(client)
    state = client.wait(run_id, timeout=90)
    assert state.status == RunStatus.SUCCEEDED, (state.nodes, workers.log_tails())
    assert "21:00" in state.nodes["clock"].output

    first = fake_llm.requests[0].body
    offered = {tool["name"]: tool for tool in first["tools"]}
    assert {CONVERT, CURRENT} <= set(offered)  # offered, whatever the policy says of them
    assert offered[CONVERT]["input_schema"]["required"] == [
        "source_timezone",
        "time",
        "target_timezone",
    ]
    assert '"target_timezone": "Asia/Tokyo"' in json.dumps(fake_llm.requests[1].body["messages"])
    [answer] = [
        block
        for block in fake_llm.requests[1].body["messages"][-1]["content"]
        if block["type"] == "tool_result"
    ]
    answered = json.dumps(answer["content"])
    assert "21:00" in answered and "<untrusted_input_" in answered  # a server's answer is data

    audit = client.audit(run_id)
    assert [(entry.tool, entry.action) for entry in audit] == [
        (CONVERT, "allow"),
        (CURRENT, "deny"),
    ]
    assert "deny by default" in audit[1].reason

    shown = dagwright("audit", run_id, "--json", env=cli_env(settings, tmp_path / "cli"))
    assert [entry["tool"] for entry in json_out(shown)] == [CONVERT, CURRENT]


def test_a_server_killed_between_two_calls_of_a_node_is_restarted_and_the_node_succeeds(
    subprocess_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer
) -> None:
    rules = [
        {"tool": CONVERT, "action": "allow"},
        # Held for a person: the node waits between its two calls, while the test kills
        # the server.
        {"tool": CURRENT, "action": "require_approval"},
    ]
    settings = with_time_server(subprocess_settings, rules)
    fake_llm.add(
        turn(RESEARCHER, 1, call(CONVERT, **NOON_IN_TOKYO)),
        turn_after("21:00", 3, call(CURRENT, timezone="Asia/Tokyo")),
        turn_after('"timezone": "Asia/Tokyo"', 5, text("Done.")),
    )
    worker = workers.start(settings, concurrency=1, pool="threads")  # one process: one server
    client = Client(settings)
    run_id = research_run(client)
    wait_until(
        lambda: client.approvals.list(run_id), timeout=60, what="the second call held for approval"
    )
    (server,) = servers_started_by(worker.pid, "mcp_server_time")
    os.kill(server, signal.SIGKILL)

    client.approvals.approve(run_id, "clock")
    state = client.wait(run_id, timeout=90)
    assert state.status == RunStatus.SUCCEEDED, (state.nodes, workers.log_tails())
    (restarted,) = servers_started_by(worker.pid, "mcp_server_time")
    assert restarted != server
    spans = client.trace(run_id).spans
    assert [span.attributes["server"] for span in spans if span.name == MCP_RESTART] == ["time"]
    calls = [span.attributes for span in spans if span.name == TOOL_CALL]
    assert [(c["tool"], c["outcome"]) for c in calls][-1] == (CURRENT, "ok")
    assert "restarted" in worker.log_path.read_text()


def servers_started_by(ancestor: int, module: str) -> list[int]:
    """The live processes running ``python -m <module>`` that descend from ``ancestor``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if module.encode() in argv and descends_from(int(entry.name), ancestor):
            found.append(int(entry.name))
    return found


def descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state: ppid
        if pid == ancestor:
            return True
    return False


# -- the git server, and the pool on its own ------------------------------------------


def git_repository(path: Path, message: str = "the first commit") -> Path:
    path.mkdir()
    identity = ["-c", "user.name=T", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], [*identity, "commit", "-q", "--allow-empty", "-m", message]):
        subprocess.run(["/usr/bin/git", *args], cwd=path, check=True)
    return path


@pytest.mark.subprocess
def test_the_git_server_lists_the_log_of_a_repository(tmp_path: Path) -> None:
    from dagwright.settings import McpServerSettings
    from dagwright.workers.mcp.pool import McpServers
    from dagwright.workers.mcp.tools import result_text

    repository = git_repository(tmp_path / "repo")
    git = McpServerSettings(
        command=sys.executable, args=["-m", "mcp_server_git", "--repository", str(repository)]
    )
    pool = McpServers({"git": git})
    try:
        assert "git_log" in [tool.name for tool in pool.tools("git")]
        result = pool.call("git", "git_log", {"repo_path": str(repository)})
    finally:
        pool.close()
    assert not result.is_error
    assert "the first commit" in result_text(result)


@pytest.mark.subprocess
def test_what_a_server_is_given_from_the_environment_is_masked_in_its_tools_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagwright.redaction import known_secrets
    from dagwright.testing import MemoryServices
    from dagwright.workers.mcp.attach import server_tools
    from dagwright.workers.mcp.pool import McpServers
    from tests.support.agents import agent_context

    secret = "git-token-Vb7Kq2Lm"  # shaped like no secret pattern: only knowing it masks it
    monkeypatch.setenv("GIT_MCP_TOKEN", secret)
    repository = git_repository(tmp_path / "repo", message=f"oops, pasted {secret} here")
    git = {
        "command": sys.executable,
        "args": ["-m", "mcp_server_git", "--repository", str(repository)],
        "env": ["GIT_MCP_TOKEN"],
    }
    settings = Settings(mcp_servers={"git": git})
    assert secret in known_secrets(settings)
    pool = McpServers(settings.mcp.servers)
    try:
        tools = {tool.name: tool for tool in server_tools(("git",), settings.mcp.servers, pool)}
        ctx = agent_context(MemoryServices(None, tmp_path), settings=settings)
        outcome = tools["mcp__git__git_log"].call(ctx, {"repo_path": str(repository)})
    finally:
        pool.close()
    assert "oops, pasted *** here" in outcome.text
    assert secret not in outcome.text
    assert tools["mcp__git__git_log"].schema()["input_schema"]["type"] == "object"


@pytest.mark.subprocess
def test_a_huge_error_of_a_server_is_cut_at_its_output_limit_as_a_result_is(
    tmp_path: Path,
) -> None:
    from dagwright.testing import MemoryServices
    from dagwright.workers.mcp.attach import server_tools
    from dagwright.workers.mcp.pool import McpServers
    from tests.support.agents import agent_context

    # The git server quotes a revision it cannot find: 300,000 characters of isError text.
    repository = git_repository(tmp_path / "repo")
    git = {
        "command": sys.executable,
        "args": ["-m", "mcp_server_git", "--repository", str(repository)],
        "max_output_chars": 2_000,
    }
    settings = Settings(mcp_servers={"git": git})
    pool = McpServers(settings.mcp.servers)
    try:
        tools = {tool.name: tool for tool in server_tools(("git",), settings.mcp.servers, pool)}
        ctx = agent_context(MemoryServices(None, tmp_path), settings=settings)
        show = tools["mcp__git__git_show"]
        outcome = show.call(ctx, {"repo_path": str(repository), "revision": "x" * 300_000})
    finally:
        pool.close()
    assert outcome.is_error and "git_show" in outcome.text
    assert len(outcome.text) < 2_100
    assert outcome.text.endswith(" characters]") and "[... truncated " in outcome.text


@pytest.mark.subprocess
def test_worker_types_and_doctor_show_each_servers_tools_and_whether_it_answers(
    tmp_path: Path,
) -> None:
    servers = {"time": TIME_SERVER, "broken": {"command": "no-such-mcp-server"}}
    attached = {
        "researcher": {"servers": ["time"]},
        "writer": {"servers": ["broken"]},
    }
    env = cli_env(
        None,
        tmp_path / "data",
        DAGWRIGHT_MCP_SERVERS=json.dumps(servers),
        DAGWRIGHT_AGENT_MCP=json.dumps(attached),
        DAGWRIGHT_REDIS_URL="redis://127.0.0.1:1/0",  # nothing there: the doctor still reports
    )
    types = {row["name"]: row for row in json_out(dagwright("worker-types", "--json", env=env))}
    assert {CONVERT, CURRENT} <= set(types["researcher"]["tools"])
    assert types["researcher"]["mcp_servers"][0]["answers"] is True
    (broken,) = types["writer"]["mcp_servers"]
    assert broken["answers"] is False and "no-such-mcp-server" in broken["problem"]
    assert types["analyst"]["mcp_servers"] == []

    human = dagwright("worker-types", env=env)
    assert "mcp:broken (not answering)" in human.stdout

    doctor = dagwright("doctor", "--json", env=env)
    checks = {check["name"]: check for check in json_out(doctor)["checks"]}
    assert checks["mcp time"]["status"] == "ok"
    assert (
        "2 tools" in checks["mcp time"]["detail"] and "researcher" in checks["mcp time"]["detail"]
    )
    assert checks["mcp broken"]["status"] == "fail"
    assert "no-such-mcp-server" in checks["mcp broken"]["hint"]


# -- streamable HTTP ------------------------------------------------------------------
# No MCP server on PyPI that both serves streamable HTTP and installs beside mcp 2.x was
# found (mcp-proxy, which would put mcp-server-time behind HTTP, needs mcp<2). So the
# time server's own MCPServer object (mcp_server_time.server.create_server) is served
# over streamable HTTP by the SDK: the PyPI server's tools, behind the SDK's transport.
SERVE_TIME_OVER_HTTP = (
    "import sys; from mcp_server_time.server import create_server; "
    "create_server('UTC').run('streamable-http', host='127.0.0.1', port=int(sys.argv[1]))"
)


class HttpTimeServer:
    def __init__(self, port: int) -> None:
        self.port = port
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVE_TIME_OVER_HTTP, str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self.listening, timeout=30, what="the time server listening over HTTP")

    def listening(self) -> bool:
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def http_time_server() -> Iterator[HttpTimeServer]:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    server = HttpTimeServer(port)
    server.start()
    yield server
    server.stop()


@pytest.mark.subprocess
def test_a_streamable_http_server_is_called_with_headers_from_the_environment_and_reconnected(
    http_time_server: HttpTimeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagwright.redaction import known_secrets
    from dagwright.workers.mcp.pool import McpServers
    from dagwright.workers.mcp.tools import result_text

    monkeypatch.setenv("TIME_MCP_AUTH", "Bearer time-secret-Hq4Zt8")
    url = f"http://127.0.0.1:{http_time_server.port}/mcp"
    settings = Settings(
        mcp_servers={"time": {"url": url, "headers": {"Authorization": "TIME_MCP_AUTH"}}}
    )
    assert "Bearer time-secret-Hq4Zt8" in known_secrets(settings)
    restarts: list[str] = []
    pool = McpServers(settings.mcp.servers)
    try:
        assert {tool.name for tool in pool.tools("time")} == {"get_current_time", "convert_time"}
        assert "21:00" in result_text(pool.call("time", "convert_time", NOON_IN_TOKYO))

        http_time_server.stop()  # the endpoint restarts: the old session is gone
        http_time_server.start()
        result = pool.call(
            "time", "convert_time", NOON_IN_TOKYO, restart_span=lambda: note(restarts, "time")
        )
    finally:
        pool.close()
    assert "21:00" in result_text(result)
    assert restarts == ["time"]


@contextlib.contextmanager
def note(restarts: list[str], server: str) -> Iterator[None]:
    restarts.append(server)
    yield
