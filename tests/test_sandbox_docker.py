"""The docker sandbox: the exact container it asks for, and what it does on a real engine.

The unit tests need no daemon. The integration tests run against the engine at
DOCKER_HOST (or the default socket) with the sandbox image; without one they are skipped
with the reason, except when DAGWRIGHT_REQUIRE_SANDBOXES names "docker" (CI), where they
fail. Start an engine with::

    eval "$(ROOT=/var/tmp/dockertest bash ops/docker/start-test-dockerd.sh)"
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import docker
import pytest
from docker.models.containers import ContainerCollection
from docker.utils.proxy import ProxyConfig

from dagwright import Settings
from dagwright.errors import SandboxFailedError, SandboxUnavailableError
from dagwright.sandbox import RUNNER, Limits, Sandbox
from dagwright.sandbox.docker import (
    LABEL,
    POOLED_LIMITS_MAX,
    SECCOMP_OPTION,
    DockerSandbox,
    _Booted,
    _WarmPool,
    container_args,
    privilege_drop,
)
from tests.support.sandboxes import sandbox_or_skip
from tests.support.waiting import wait_until

pytestmark = pytest.mark.sandbox

MIB = 1024 * 1024
SECRET = "dagwright-test-secret-7f3a"
LIMITS = Limits(
    wall_time_s=5.0,
    cpu_time_s=2.5,
    memory_mb=128,
    pids=32,
    open_files=50,
    file_size_mb=8,
    scratch_mb=16,
    output_bytes=4096,
)
NO_DAEMON = "unix:///nonexistent/docker.sock"


# --- the container's arguments (no daemon) ---------------------------------------------


def test_container_args_are_pinned() -> None:
    tmpfs = "size=16m,uid=1234,gid=1234,mode=1777,noexec,nosuid,nodev"
    assert container_args("img:tag", LIMITS, uid=1234) == {
        "image": "img:tag",
        "command": ["python3", "-I", "-S", "-c", privilege_drop(1234)],
        "detach": False,
        "stdin_open": True,
        "tty": False,
        "user": "0:0",
        "environment": {},
        "use_config_proxy": False,
        "hostname": "sandbox",
        "working_dir": "/scratch",
        "labels": {"dagwright.sandbox": "1"},
        "network_mode": "none",
        "ipc_mode": "none",
        "read_only": True,
        "tmpfs": {"/tmp": tmpfs, "/scratch": tmpfs},
        "mem_limit": 128 * MIB,
        "memswap_limit": 128 * MIB,
        "nano_cpus": 1_000_000_000,
        "pids_limit": 32,
        "ulimits": [
            {"name": "nofile", "soft": 50, "hard": 50},
            {"name": "fsize", "soft": 8 * MIB, "hard": 8 * MIB},
            {"name": "cpu", "soft": 3, "hard": 4},
            {"name": "core", "soft": 0, "hard": 0},
        ],
        "cap_drop": ["ALL"],
        "cap_add": ["SETUID", "SETGID", "SETPCAP"],
        "security_opt": ["no-new-privileges", SECCOMP_OPTION],
        "init": True,
        "log_config": {"type": "none"},
    }
    assert repr(RUNNER) in privilege_drop(1234)  # what it execs, as uid 1234


def test_container_args_follow_the_settings() -> None:
    sandbox = DockerSandbox.from_settings(Settings(sandbox_image="x:1", sandbox_uid=1000).sandbox)
    assert (sandbox.name, sandbox.image, sandbox.uid) == ("docker", "x:1", 1000)
    assert isinstance(sandbox, Sandbox)
    args = container_args("x:1", Limits(), uid=1000)
    assert (args["pids_limit"], args["mem_limit"]) == (64, 256 * MIB)
    assert "os.setresuid(1000,1000,1000)" in args["command"][-1]


def captured_create_body(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The JSON body the SDK would POST to /containers/create for one run."""
    client = docker.DockerClient(base_url=NO_DAEMON, version="1.41")
    client.api._proxy_configs = ProxyConfig.from_dict({"httpProxy": f"http://{SECRET}:3128"})
    bodies: list[dict[str, Any]] = []

    def capture(config: dict[str, Any], *_: Any) -> dict[str, Any]:
        bodies.append(config)
        raise docker.errors.DockerException("captured")

    monkeypatch.setattr(client.api, "create_container_from_config", capture)
    with pytest.raises(SandboxFailedError, match="captured"):
        DockerSandbox("img:tag", client=client).run("print(1)", limits=LIMITS)
    return json.loads(json.dumps(bodies[0], default=dict))


def test_no_host_environment_reaches_the_container(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "DAGWRIGHT_REDIS_URL", "HTTP_PROXY", "PYTHONPATH"):
        monkeypatch.setenv(name, SECRET)
    assert SECRET not in json.dumps(container_args("img:tag", LIMITS, uid=65534))
    body = captured_create_body(monkeypatch)
    assert body["Env"] == []  # not even the proxy of the docker client's config
    assert SECRET not in json.dumps(body)


def test_the_daemon_gets_stdin_once_and_real_ulimits(monkeypatch: pytest.MonkeyPatch) -> None:
    body = captured_create_body(monkeypatch)
    assert (body["OpenStdin"], body["StdinOnce"], body["Tty"]) == (True, True, False)
    host = body["HostConfig"]
    assert host["Ulimits"][0] == {"Name": "nofile", "Soft": 50, "Hard": 50}
    assert host["LogConfig"] == {"Type": "none", "Config": {}}
    assert (host["NetworkMode"], host["IpcMode"], host["ReadonlyRootfs"]) == ("none", "none", True)
    assert host["Memory"] == host["MemorySwap"] == 128 * MIB
    assert "Binds" not in host and "Devices" not in host and "OomKillDisable" not in host
    assert (host["CapDrop"], host["CapAdd"]) == (["ALL"], ["SETUID", "SETGID", "SETPCAP"])
    profile = json.loads(host["SecurityOpt"][1].removeprefix("seccomp="))
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW" and profile["syscalls"][0]["errnoRet"] == 1
    assert {"ptrace", "io_uring_setup", "process_vm_readv"} <= set(profile["syscalls"][0]["names"])


def test_nothing_contacts_the_daemon_until_used() -> None:
    DockerSandbox("img:tag")  # would raise if it connected to the (absent) daemon below
    client = docker.DockerClient(base_url=NO_DAEMON, version="1.41")
    sandbox = DockerSandbox("img:tag", client=client)
    assert sandbox.available() is False
    with pytest.raises(SandboxFailedError, match="docker: creating a container failed"):
        sandbox.run("print(1)", limits=LIMITS)
    with pytest.raises(SandboxUnavailableError, match="cannot reach the Docker daemon"):
        sandbox.self_test()


class FakeEngine:
    """Boots numbered stand-ins for containers (the pool's logic, without a daemon)."""

    def __init__(self) -> None:
        self.booted: list[str] = []
        self.discarded: list[str] = []

    def boot(self, limits: Limits) -> _Booted:
        self.booted.append(f"c{len(self.booted)}")
        return _Booted(SimpleNamespace(id=self.booted[-1]), None, 0.0)  # type: ignore[arg-type]

    def running(self, container: Any) -> bool:
        return True

    def discard(self, container: Any, sock: Any) -> None:
        self.discarded.append(container.id)


def test_warm_pool_hands_each_container_out_once_for_a_few_limits() -> None:
    engine = FakeEngine()
    pool = _WarmPool(2, engine)  # type: ignore[arg-type]
    pool.fill(LIMITS)
    taken = [pool.take(LIMITS), pool.take(LIMITS)]
    assert [booted.container.id for booted in taken if booted] == ["c0", "c1"]
    for memory_mb in range(100, 100 + POOLED_LIMITS_MAX + 2):  # more kinds than are pooled
        assert pool.take(Limits(memory_mb=memory_mb)) is None
    every = 2 + 2 * POOLED_LIMITS_MAX  # the first two, then two for each kind pooled
    wait_until(lambda: len(engine.booted) == every, timeout=5, what="the refills")
    pool.close()
    assert sorted(engine.discarded) == sorted(engine.booted[2:])
    assert pool.take(LIMITS) is None and len(engine.booted) == every


# --- a real engine ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def sandbox() -> DockerSandbox:
    found = sandbox_or_skip("docker")
    assert isinstance(found, DockerSandbox)
    assert found.available(), "self_test passed but available() is False"
    return found


@pytest.fixture
def created(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Ids of the containers created during the test."""
    ids: list[str] = []
    create = ContainerCollection.create

    def recording_create(self: ContainerCollection, *args: Any, **kwargs: Any) -> Any:
        container = create(self, *args, **kwargs)
        ids.append(container.id)
        return container

    monkeypatch.setattr(ContainerCollection, "create", recording_create)
    return ids


def left_behind(ids: list[str]) -> set[str]:
    """Which of ``ids`` still exist, among the containers carrying the sandbox label."""
    client = docker.from_env()
    labelled = client.containers.list(all=True, filters={"label": f"{LABEL}=1"})
    return {c.id for c in labelled} & set(ids)


def report(sandbox: DockerSandbox, code: str, **limits: Any) -> dict[str, Any]:
    result = sandbox.run(code, limits=Limits(**limits))
    assert result.ok, result
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def test_input_json_round_trips(sandbox: DockerSandbox, created: list[str]) -> None:
    code = (
        "import json, sys\n"
        "data = json.load(sys.stdin)\n"
        f"# {'x' * 200_000}  (more than one argv string may hold)\n"
        "print(json.dumps({'sum': sum(data['n']), 'text': data['text'].upper()}))\n"
    )
    result = sandbox.run(code, input_json='{"n": [1, 2, 3], "text": "héllo"}', limits=LIMITS)
    assert result.ok and not result.truncated, result
    assert json.loads(result.stdout) == {"sum": 6, "text": "HÉLLO"}
    assert 0 < result.duration_s < LIMITS.wall_time_s
    assert len(created) == 1 and not left_behind(created)


def test_failure_gives_exit_code_and_stderr(sandbox: DockerSandbox) -> None:
    result = sandbox.run("import sys\nprint('boom', file=sys.stderr)\nsys.exit(3)", limits=LIMITS)
    assert (result.exit_code, result.stdout, result.stderr) == (3, "", "boom\n")
    assert not result.ok and result.describe_failure() == "the code exited with 3: boom"
    crash = sandbox.run("1 / 0", limits=LIMITS)
    assert crash.exit_code == 1 and 'File "<code>", line 1' in crash.stderr
    assert crash.stderr.strip().endswith("ZeroDivisionError: division by zero")


def test_runs_unprivileged_with_only_tmpfs_writable(sandbox: DockerSandbox) -> None:
    code = """
import json, os
def writable(path):
    try:
        open(path, "w").close()
        return True
    except OSError:
        return False
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(json.dumps({"ids": [os.getuid(), os.getgid()], "cwd": os.getcwd(),
                  "caps": int(status["CapEff"], 16), "nnp": status["NoNewPrivs"].strip(),
                  "writable": [p for p in ("/x", "/etc/x", "/tmp/x", "/scratch/x", "/dev/shm/x")
                               if writable(p)]}))
"""
    seen = report(sandbox, code)
    assert seen == {
        "ids": [65534, 65534],
        "cwd": "/scratch",
        "caps": 0,
        "nnp": "1",
        "writable": ["/tmp/x", "/scratch/x"],
    }


def test_sees_no_host_environment(sandbox: DockerSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    seen = report(sandbox, "import json, os\nprint(json.dumps(dict(os.environ)))")
    assert SECRET not in json.dumps(seen)
    assert set(seen) <= {"PATH", "HOME", "HOSTNAME", "LC_CTYPE"}


def test_has_no_network(sandbox: DockerSandbox) -> None:
    code = """
import json, socket
def reaches(address):
    try:
        socket.create_connection(address, timeout=2).close()
        return True
    except OSError:
        return False
print(json.dumps({"interfaces": [name for _, name in socket.if_nameindex()],
                  "reaches": [a for a in (("1.1.1.1", 53), ("10.0.0.1", 80)) if reaches(a)]}))
"""
    assert report(sandbox, code) == {"interfaces": ["lo"], "reaches": []}


# Code tries to stop or trace the container's init (pid 1): had it succeeded, the init
# would stay stopped, and the run would last until its wall time. libc.ptrace and
# io_uring_setup (425) have one number on x86_64 and aarch64.
INIT_ATTACK = """
import ctypes, errno, json, os, signal
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = libc.ptrace.restype = ctypes.c_long
def outcome(result):
    return "allowed" if result >= 0 else errno.errorcode[ctypes.get_errno()]
def opens(path):
    try:
        open(path, "r+b").close()
        return "allowed"
    except OSError as exc:
        return errno.errorcode[exc.errno]
def signals(pid, sig):
    try:
        os.kill(pid, sig)
        return "allowed"
    except OSError as exc:
        return errno.errorcode[exc.errno]
PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206
print(json.dumps({
    "init_uid": int(open("/proc/1/status").read().split("Uid:")[1].split()[0]),
    "uid": os.getuid(),
    "ptrace_attach": outcome(libc.ptrace(PTRACE_ATTACH, 1, None, None)),
    "ptrace_seize": outcome(libc.ptrace(PTRACE_SEIZE, 1, None, None)),
    "proc_mem": opens("/proc/1/mem"),
    "sigstop": signals(1, signal.SIGSTOP),
    "io_uring_setup": outcome(libc.syscall(ctypes.c_long(425), ctypes.c_long(1), None)),
}))
"""


def test_the_init_cannot_be_traced_or_stopped_and_the_run_ends_promptly(
    sandbox: DockerSandbox,
) -> None:
    result = sandbox.run(INIT_ATTACK, limits=Limits(wall_time_s=10.0))
    assert result.ok, result  # not stalled until the wall time by a stopped init
    assert result.duration_s < 3.0
    seen = json.loads(result.stdout)
    assert (seen["init_uid"], seen["uid"]) == (0, 65534), seen
    assert (seen["ptrace_attach"], seen["ptrace_seize"], seen["sigstop"]) == ("EPERM",) * 3
    assert seen["proc_mem"] == "EACCES"
    assert seen["io_uring_setup"] in ("EPERM", "ENOSYS"), seen  # never reaches io_uring


def test_timeout_kills_and_removes_the_container(
    sandbox: DockerSandbox, created: list[str]
) -> None:
    result = sandbox.run("while True:\n    pass", limits=Limits(wall_time_s=1.0))
    assert result.timed_out and result.exit_code is None and not result.ok
    assert 1.0 <= result.duration_s < 5.0
    assert len(created) == 1 and not left_behind(created)


def test_cpu_time_limit_is_out_of_time(sandbox: DockerSandbox) -> None:
    result = sandbox.run("while True:\n    pass", limits=Limits(cpu_time_s=1.0, wall_time_s=20))
    assert result.timed_out and result.exit_code is None and not result.oom
    assert 1.0 <= result.duration_s < 10.0


def test_closing_output_does_not_escape_the_deadline(sandbox: DockerSandbox) -> None:
    code = "import os\nos.close(1)\nos.close(2)\nwhile True:\n    pass"
    result = sandbox.run(code, limits=Limits(wall_time_s=1.0))
    assert result.timed_out and result.exit_code is None
    assert result.duration_s < 5.0


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_cap_truncates_and_ends_the_run(
    sandbox: DockerSandbox, created: list[str], stream: str
) -> None:
    code = f"import sys\nwhile True:\n    sys.{stream}.write('x' * 1000)\n    sys.{stream}.flush()"
    result = sandbox.run(code, limits=Limits(output_bytes=1024))
    assert result.truncated and result.exit_code is None and not result.timed_out
    assert getattr(result, stream) == "x" * 1024
    assert not left_behind(created)


def test_output_under_the_cap_is_whole(sandbox: DockerSandbox) -> None:
    code = "import sys\nprint('x' * 1000)\nprint('e' * 1023, file=sys.stderr, end='')"
    result = sandbox.run(code, limits=Limits(output_bytes=1024))
    assert result.ok and not result.truncated
    assert (result.stdout, result.stderr) == ("x" * 1000 + "\n", "e" * 1023)


def test_oom_is_detected(sandbox: DockerSandbox, created: list[str]) -> None:
    result = sandbox.run("block = b'x' * (1 << 30)", limits=Limits(memory_mb=64))
    assert result.oom and not result.ok and not result.timed_out, result
    assert result.describe_failure() == "the code ran out of memory"
    assert not left_behind(created)


def test_missing_image_is_unavailable_with_the_fix(sandbox: DockerSandbox) -> None:
    missing = DockerSandbox("dagwright-sandbox:no-such-tag")
    assert missing.available() is False
    with pytest.raises(SandboxUnavailableError, match="docker build -t dagwright-sandbox:no-such"):
        missing.self_test()
    with pytest.raises(SandboxUnavailableError, match="not found"):
        missing.run("print(1)", limits=LIMITS)


@pytest.fixture
def warm(sandbox: DockerSandbox) -> Iterator[DockerSandbox]:
    with DockerSandbox(sandbox.image, warm_pool=2) as warm:
        yield warm


def test_warm_pool_runs_each_container_once_and_cleans_up(
    warm: DockerSandbox, created: list[str]
) -> None:
    warm.prewarm(LIMITS)
    assert len(created) == 2
    first = warm.run("import os\nopen('mark', 'w')\nprint(os.listdir('.'))", limits=LIMITS)
    second = warm.run("import os\nprint(os.listdir('.'))", limits=LIMITS)
    assert (first.stdout, second.stdout) == ("['mark']\n", "[]\n")  # a fresh scratch each
    other = warm.run("print(1)", limits=Limits(memory_mb=96))  # not pooled yet: cold
    assert other.ok and other.stdout == "1\n"
    warm.close()
    assert not left_behind(created)


def test_warm_pool_replaces_a_container_that_died_waiting(
    warm: DockerSandbox, created: list[str]
) -> None:
    warm.prewarm(LIMITS)
    for container_id in created:
        docker.from_env().containers.get(container_id).kill()
    result = warm.run("print('fresh')", limits=LIMITS)
    assert result.ok and result.stdout == "fresh\n"
    warm.close()
    assert not left_behind(created)
