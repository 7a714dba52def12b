"""Local access to a loopback server (``dagwright up``'s): its user gets in with the token
the server wrote for them and its one-time login links; no other user of the machine
gets in, whatever connection they open."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import redis

from dagwright.server.local_access import (
    answers,
    login_url,
    read_token,
    token_file,
    token_name,
    write_private,
)
from dagwright.server.origins import host_is_loopback
from dagwright.server.sessions import SESSION_COOKIE
from dagwright.settings import Settings
from tests.support.api_server import ApiServer, free_port, running_server
from tests.support.cli import cli_env, dagwright, one_error_line
from tests.support.waiting import wait_until

OTHER_USER = 65534  # nobody
SYSTEM_PYTHON = Path("/usr/bin/python3")  # one another user may run (no venv under /root)

# Run as the other user: connect to the server from each "address:port" argument, or
# (TIME_WAIT) N times from 127.0.0.2 and the port of a connection just closed first by
# its client from 127.0.0.3; print the status of each whoami sent with no credential.
BORROW = r"""
import socket, sys, time
server = ("127.0.0.1", int(sys.argv[1]))
def connect(address, port):
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.settimeout(20)
    sock.bind((address, port))
    sock.connect(server)
    return sock
def time_wait_port():
    first = connect("127.0.0.3", 0)
    port = first.getsockname()[1]
    first.close()
    time.sleep(0.02)
    return port
if sys.argv[2] == "time-wait":
    sources = [("127.0.0.2", time_wait_port()) for _ in range(int(sys.argv[3]))]
else:
    sources = [(a, int(p)) for a, p in (s.rsplit(":", 1) for s in sys.argv[3:])]
for address, port in sources:
    sock = connect(address, port)
    sock.sendall(b"GET /api/v1/whoami HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    print(sock.recv(64).split()[1].decode(), flush=True)
    sock.close()
"""
READ_FILE = """
import sys
try:
    open(sys.argv[1]).read()
except OSError as refused:
    print(type(refused).__name__)
"""

needs_root = pytest.mark.skipif(
    os.getuid() != 0 or not SYSTEM_PYTHON.exists(),
    reason="needs root (to act as another user) and /usr/bin/python3",
)


def as_other_user(script: str, *args: str) -> list[str]:
    """The lines ``script`` printed, run by /usr/bin/python3 as nobody."""
    done = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", script, *args],
        user=OTHER_USER,
        group=OTHER_USER,
        extra_groups=[],
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def whoami(server: ApiServer, **options: object) -> httpx.Response:
    with httpx.Client(base_url=server.url, timeout=10, trust_env=False) as http:
        return http.get("/api/v1/whoami", **options)  # type: ignore[arg-type]


@needs_root
def test_another_user_borrowing_an_open_connections_port_gets_401(
    settings: Settings, redis_client: redis.Redis
) -> None:
    """From 127.0.0.N and the source port of each open connection of the server's user
    (what the procfs guess read as theirs: 7 to 22 of 30 got in)."""
    with running_server(settings, local_access=True) as server:
        owners = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(30)]
        try:
            ports = [f"127.0.0.{2 + n}:{s.getsockname()[1]}" for n, s in enumerate(owners)]
            answers = as_other_user(BORROW, str(server.port), "open", *ports)
        finally:
            for owner in owners:
                owner.close()
    assert answers == ["401"] * len(ports), f"{answers.count('200')} of {len(ports)} got in"


@needs_root
def test_another_user_riding_time_wait_rows_of_a_root_server_gets_401(
    settings: Settings, redis_client: redis.Redis
) -> None:
    """TIME_WAIT rows show uid 0: with the server running as root, they read as its
    user's (60 of 60 got in with the procfs guess), with no victim connection at all."""
    with running_server(settings, local_access=True) as server:
        answers = as_other_user(BORROW, str(server.port), "time-wait", "60")
    assert answers == ["401"] * 60, f"{answers.count('200')} of 60 got in"


@needs_root
def test_the_token_file_is_its_users_alone_and_lets_them_in(
    settings: Settings, redis_client: redis.Redis
) -> None:
    with running_server(settings, local_access=True) as server:
        path = token_file(settings.process.data_dir, server.port)
        mode = path.stat()
        assert stat.S_IMODE(mode.st_mode) == 0o600 and mode.st_uid == os.getuid()
        assert as_other_user(READ_FILE, str(path)) == ["PermissionError"]
        token = read_token(settings.process.data_dir, server.port)
        assert whoami(server).status_code == 401  # no credential: nobody, this user too
        me = whoami(server, headers={"Authorization": f"Bearer {token}"}).json()
        assert me["scope"] == "admin" and me["name"].startswith("local access")
        assert whoami(server, auth=("", str(token))).status_code == 200  # curl -u :TOKEN
    # Stopped: the file is gone and the token revoked.
    assert not path.exists()
    assert all(info.name != me["name"] for info in server.client.tokens.list())


def test_tokens_killed_servers_left_behind_are_revoked_by_the_next(
    settings: Settings, redis_client: redis.Redis, api: ApiServer
) -> None:
    """As ``kill -9`` of ``up`` leaves them: the file, and the token in Valkey's data; a
    file whose port answers (a live server's) is left alone."""
    client = api.client
    dead_port = free_port()
    left = client.tokens.create(token_name(dead_port), scope="admin").token
    write_private(token_file(settings.process.data_dir, dead_port), left)
    live = client.tokens.create(token_name(api.port), scope="admin").token
    write_private(token_file(settings.process.data_dir, api.port), live)
    with running_server(settings, local_access=True) as server:
        assert whoami(server, headers={"Authorization": f"Bearer {left}"}).status_code == 401
        assert not token_file(settings.process.data_dir, dead_port).exists()
        assert whoami(server, headers={"Authorization": f"Bearer {live}"}).status_code == 200
    token_file(settings.process.data_dir, api.port).unlink()


def test_dagwright_server_stopped_revokes_its_token_and_removes_its_file(
    settings: Settings, redis_client: redis.Redis, api: ApiServer, tmp_path: Path
) -> None:
    """SIGTERM (``up`` stopping it): uvicorn re-raises the signal once it has shut down,
    so the app's shutdown is where this happens."""
    port = free_port()
    env = cli_env(settings, settings.process.data_dir)
    command = [sys.executable, "-m", "dagwright", "server", "--local-access", "--port", str(port)]
    path = token_file(settings.process.data_dir, port)
    with subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True) as server:
        try:
            wait_until(lambda: server.poll() is not None or path.exists(), timeout=60)
            token = read_token(settings.process.data_dir, port)
            wait_until(lambda: answers(port), timeout=30, what="the server to listen")
            url = f"http://127.0.0.1:{port}/api/v1/whoami"
            mine = httpx.get(url, headers={"Authorization": f"Bearer {token}"}, trust_env=False)
            assert mine.status_code == 200
        finally:
            server.terminate()
            server.wait(timeout=30)
    assert not path.exists(), server.stderr.read() if server.stderr else ""
    assert api.client.tokens.authenticate(str(token)) is None


def test_the_token_file_is_made_private_whatever_the_umask_and_what_was_there(
    tmp_path: Path,
) -> None:
    path = tmp_path / "server-1.token"
    path.write_text("old")
    path.chmod(0o644)
    old_umask = os.umask(0)
    try:
        write_private(path, "secret")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text() == "secret"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left


def test_a_login_link_opens_one_session_then_nothing(
    settings: Settings, redis_client: redis.Redis
) -> None:
    with running_server(settings, local_access=True) as server:
        token = str(read_token(settings.process.data_dir, server.port))
        link = login_url(server.url, token)
        assert len(link) <= 80
        with httpx.Client(timeout=10, trust_env=False) as browser:
            opened = browser.get(link)
            assert opened.status_code == 303 and opened.headers["location"] == "/"
            assert opened.headers["referrer-policy"] == "no-referrer"
            assert SESSION_COOKIE in browser.cookies
            assert browser.get(f"{server.url}/api/v1/whoami").json()["scope"] == "admin"
            assert browser.get(link).status_code == 303  # logged in already: to the dashboard
        with httpx.Client(timeout=10, trust_env=False) as history:
            again = history.get(link)  # the link as the browser's history keeps it
            assert again.status_code == 401 and "used already" in again.text
            assert SESSION_COOKIE not in history.cookies
            forged = login_url(server.url, "dw_not-this-servers-token")
            assert history.get(forged).status_code == 401
            not_ascii = forged[:-1] + "é"  # hmac takes ASCII only: not a 500
            assert history.get(not_ascii).status_code == 401
            fresh = login_url(server.url, token)
            rebound = history.get(fresh, headers={"Host": "evil.localhost"})
            assert rebound.status_code == 401  # a DNS-rebinding page's name
            assert history.get(fresh).status_code == 303  # the same link, untaken: works


def test_a_login_link_opens_nothing_once_the_servers_token_is_revoked(
    settings: Settings, redis_client: redis.Redis
) -> None:
    with running_server(settings, local_access=True) as server:
        assert server.local_access is not None
        link = login_url(server.url, server.local_access.token)
        server.client.tokens.revoke(server.local_access.token_id)  # dagwright token revoke
        with httpx.Client(timeout=10, trust_env=False) as browser:
            answer = browser.get(link)
            assert answer.status_code == 401 and "revoked" in answer.text
            assert SESSION_COOKIE not in browser.cookies


def test_a_server_without_local_access_takes_no_login_link(api: ApiServer) -> None:
    link = login_url(api.url, api.token("admin"))
    with httpx.Client(timeout=10, trust_env=False) as browser:
        assert browser.get(link).status_code == 401
        assert SESSION_COOKIE not in browser.cookies


LOOPBACK_HOSTS = ["127.0.0.1", "127.0.0.1:8400", "127.3.2.1:80", "localhost", "LocalHost:8400"]
LOOPBACK_HOSTS += ["[::1]", "[::1]:8400"]
HOSTILE_HOSTS = ["evil.localhost", "x@127.0.0.1", "x@127.0.0.1:8400", "localhost.", "127.1"]
HOSTILE_HOSTS += ["0x7f.0.0.1", "2130706433", "127.000.0.1", "[::ffff:127.0.0.1]", "::1"]
HOSTILE_HOSTS += ["127.0.0.1:8400:1", "[::1]x", "127.0.0.1.evil.example", "10.0.0.1"]
HOSTILE_HOSTS += ["localhost:80@evil.example", "", " 127.0.0.1"]


@pytest.mark.parametrize("host", LOOPBACK_HOSTS)
def test_a_loopback_host_header_is_exactly_one(host: str) -> None:
    assert host_is_loopback(host)


@pytest.mark.parametrize("host", HOSTILE_HOSTS)
def test_a_hostile_host_header_is_not_loopback(host: str) -> None:
    assert not host_is_loopback(host)


def test_dagwright_dashboard_without_a_local_stack_says_how_to_start_one(tmp_path: Path) -> None:
    result = dagwright("dashboard", env=cli_env(None, tmp_path))
    assert result.returncode == 2
    assert "start one with `dagwright up`" in one_error_line(result)
