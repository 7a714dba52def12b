"""What every sandbox backend provides: ``Limits`` in, ``ExecutionResult`` out.

A backend runs a Python program (model-written code) isolated from the host: no host
environment, no network, no host files beyond the interpreter, bounded time, memory,
processes, files and output. The program's code and its input travel on stdin, framed by
:func:`encode_stdin` and unpacked inside the sandbox by :data:`RUNNER` (passed with
``python3 -c``): any size of code fits (an argument is capped at 128 KiB by Linux), and
nothing has to be written into a read-only root. The program then sees its input JSON as
its own stdin.
"""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from dagwright.settings import SandboxSettings

# Runs inside the sandbox. Reads "<code length>\n<code><input>" from stdin, gives the
# program the input as sys.stdin, and runs it as __main__ (tracebacks name "<code>"). An
# import of a module the sandbox lacks ends with one line the model can act on: what is
# missing, that nothing can be installed, and what the sandbox has (read here, inside).
RUNNER = (
    "import io,sys\n"
    "_d=sys.stdin.buffer.read()\n"
    "_n,_,_r=_d.partition(b'\\n')\n"
    "_n=int(_n)\n"
    "_c=_r[:_n].decode('utf-8')\n"
    "sys.stdin=io.TextIOWrapper(io.BytesIO(_r[_n:]),encoding='utf-8')\n"
    "del _d,_r,_n\n"
    "_g={'__name__':'__main__','__builtins__':__builtins__}\n"
    "try:\n"
    " exec(compile(_c,'<code>','exec'),_g)\n"
    "except ModuleNotFoundError as _e:\n"
    " import importlib.metadata as _m,traceback as _t\n"
    " _t.print_exc()\n"
    " _a=sorted({f\"{d.metadata['Name']} {d.version}\" for d in _m.distributions()"
    " if d.metadata['Name']})\n"
    " print(f'module {_e.name!r} is not available in this sandbox, and nothing can be'"
    " ' installed (no network); available: the standard library'"
    "+(' and '+', '.join(_a) if _a else ' only'),file=sys.stderr)\n"
    " sys.exit(1)\n"
)

MIB = 1024 * 1024
CANCEL_POLL_S = 0.1  # how often a running program's cancel event is looked at


def encode_stdin(code: str, input_json: str) -> bytes:
    """The bytes a backend writes to the sandboxed process's stdin (see :data:`RUNNER`)."""
    body = code.encode("utf-8")
    return str(len(body)).encode() + b"\n" + body + input_json.encode("utf-8")


@dataclass(frozen=True)
class Limits:
    """Bounds of one execution. Memory and pids cover the whole process tree."""

    wall_time_s: float = 30.0
    cpu_time_s: float = 30.0
    memory_mb: int = 256
    pids: int = 64
    open_files: int = 64
    file_size_mb: int = 16  # largest file the program may write (RLIMIT_FSIZE)
    scratch_mb: int = 64  # size of the writable tmpfs (/tmp and the scratch directory)
    output_bytes: int = 1_000_000  # stdout and stderr each; the rest is dropped

    @classmethod
    def from_settings(cls, sandbox: SandboxSettings) -> Limits:
        """The configured default limits (``Settings.sandbox``)."""
        return cls(
            wall_time_s=sandbox.wall_time_s,
            cpu_time_s=sandbox.cpu_time_s,
            memory_mb=sandbox.memory_mb,
            pids=sandbox.pids,
            open_files=sandbox.open_files,
            file_size_mb=sandbox.file_size_mb,
            scratch_mb=sandbox.scratch_mb,
            output_bytes=sandbox.output_bytes,
        )


@dataclass(frozen=True)
class ExecutionResult:
    """What one execution did. ``exit_code`` is None when the sandbox killed the program
    (time limit, output cap, cancel); ``oom`` when it was stopped for exceeding its
    memory; ``cancelled`` when the caller's ``cancel`` event stopped it."""

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool = False
    oom: bool = False
    truncated: bool = False  # stdout or stderr hit output_bytes
    duration_s: float = 0.0
    cancelled: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not (self.timed_out or self.oom or self.cancelled)

    @property
    def outcome(self) -> str:
        """How it ended, in one word: ok, error, timeout, oom or cancelled."""
        if self.cancelled:
            return "cancelled"
        if self.timed_out:
            return "timeout"
        if self.oom:
            return "oom"
        return "ok" if self.ok else "error"

    def describe_failure(self) -> str:
        """One line on why the program did not succeed (for errors and the model)."""
        if self.cancelled:
            return f"the code was stopped after {self.duration_s:.1f}s: its node had to stop"
        if self.timed_out:
            return f"the code ran out of time after {self.duration_s:.1f}s"
        if self.oom:
            return "the code ran out of memory"
        if self.truncated and self.exit_code is None:
            return f"the code was stopped after {self.duration_s:.1f}s: it printed too much"
        tail = self.stderr.strip().splitlines()[-1:] or [""]
        return f"the code exited with {self.exit_code}: {tail[0]}".rstrip(": ")


@runtime_checkable
class Sandbox(Protocol):
    """A sandbox backend."""

    name: str

    def available(self) -> bool:
        """Whether the backend can be used here at all (binary, daemon, image present);
        cheap, no execution."""
        ...

    def self_test(self) -> None:
        """Run a probe program and check the isolation holds; SandboxUnavailableError
        saying why if it does not."""
        ...

    def run(
        self,
        code: str,
        *,
        input_json: str = "null",
        limits: Limits,
        cancel: threading.Event | None = None,
    ) -> ExecutionResult:
        """Run ``code`` (a Python program) with ``input_json`` on its stdin. Whatever the
        code does is in the result; SandboxFailedError only if the backend itself fails.
        Setting ``cancel`` kills the program (its whole tree) within ``CANCEL_POLL_S``
        or so; the result then says ``cancelled``."""
        ...


# What every backend's self-test runs: its report must show the isolation holds. The input
# is the port of a listener on the host's loopback, as the broker would be; that it
# arrives at all shows stdin works.
PROBE = """\
import json, os, socket, sys

def reaches(host, port):
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False

def writes(path):
    try:
        open(path, "w").close()
        return True
    except OSError:
        return False

CAP_SETS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
port = json.load(sys.stdin)
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(json.dumps({
    "uid": os.getuid(),
    "caps": [name for name in CAP_SETS if int(status[name], 16)],
    "env": sorted(os.environ),
    "interfaces": [name for _, name in socket.if_nameindex()],
    "network": reaches("127.0.0.1", port) or reaches("1.1.1.1", 53),
    "writes_root": writes("/dagwright-probe") or writes("/usr/dagwright-probe"),
    "writes_scratch": writes("dagwright-probe"),
}))
"""
PROBE_LIMITS = Limits(wall_time_s=30, cpu_time_s=10, memory_mb=128, pids=16, scratch_mb=4)


def probe_isolation(
    sandbox: Sandbox, *, uid: int, allowed_env: set[str] | None = None
) -> list[str]:
    """Run :data:`PROBE` in ``sandbox``: what is wrong with its isolation (empty: nothing)
    when the program must run as ``uid`` and see no variable but ``allowed_env`` (None:
    not checked, as an image may set variables of its own). SandboxFailedError if the
    backend itself fails."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        result = sandbox.run(PROBE, input_json=str(port), limits=PROBE_LIMITS)
    if not result.ok:
        return [f"the probe program failed: {result.describe_failure()}"]
    try:
        report = json.loads(result.stdout)
    except ValueError:
        return [f"the probe program printed no report: {result.stdout[:200]!r}"]
    leaked = sorted(set(report["env"]) - allowed_env) if allowed_env is not None else []
    checks = {
        f"runs as uid {report['uid']}, not {uid}": report["uid"] == uid != 0,
        f"has capabilities in {', '.join(report['caps'])}": not report["caps"],
        f"host environment variables reached it: {', '.join(leaked)}": not leaked,
        f"has network interfaces {report['interfaces']}": report["interfaces"] == ["lo"],
        "reached the network": not report["network"],
        "can write its root or /usr": not report["writes_root"],
        "cannot write its working directory": report["writes_scratch"],
    }
    return [problem for problem, holds in checks.items() if not holds]
