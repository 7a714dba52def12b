"""The default install, without any extra (issue 32): what a newcomer gets from
``pip install dagwright`` works, and each missing extra says in one line which to install.

The suite's own environment has every extra; these tests run the ``dagwright`` of another
virtualenv, made by ``.ci/machine-setup`` with ``pip install .`` and nothing else, named by
DAGWRIGHT_BARE_VENV. Without it they are skipped, unless DAGWRIGHT_REQUIRE_BARE=1 (CI),
where a skip would hide a broken default install: they fail instead. Every command runs in
a fresh directory with its own HOME and data dir, as on a fresh machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dagwright.stackfile import read_stack
from tests.support.processes import REPO_ROOT
from tests.support.waiting import wait_until

pytestmark = pytest.mark.subprocess

# One module per extra (opentelemetry-api, a dependency, has the `opentelemetry` package).
EXTRA_MODULES = ("PIL", "flower", "docker", "mcp", "opentelemetry.sdk")
COMMAND_TIMEOUT_S = 120.0
UP_READY_TIMEOUT_S = 90.0


def bare_venv() -> Path:
    """The extras-free virtualenv, or a skip (a failure under DAGWRIGHT_REQUIRE_BARE)."""
    venv = os.environ.get("DAGWRIGHT_BARE_VENV")
    if venv and (Path(venv) / "bin" / "dagwright").exists():
        return Path(venv)
    why = f"no extras-free install: DAGWRIGHT_BARE_VENV={venv or '(unset)'}"
    if os.environ.get("DAGWRIGHT_REQUIRE_BARE") == "1":
        pytest.fail(f"{why}, and DAGWRIGHT_REQUIRE_BARE=1 (.ci/machine-setup makes it)")
    pytest.skip(why)


@dataclass
class Bare:
    """The bare install's ``dagwright`` in a fresh directory, HOME and data dir."""

    venv: Path
    workdir: Path

    @property
    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DAGWRIGHT_", "ANTHROPIC_", "VIRTUAL_ENV", "PYTHON"))
        }
        env["PATH"] = f"{self.venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
        env["HOME"] = str(self.workdir / "home")
        env["DAGWRIGHT_DATA_DIR"] = str(self.workdir / "data")
        env["COLUMNS"] = "200"
        return env

    def run(self, *args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.venv / "bin" / "dagwright"), *args],
            cwd=self.workdir,
            env={**self.env, **extra_env},
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )

    def up(self) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [str(self.venv / "bin" / "dagwright"), "up"],
            cwd=self.workdir,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )


@pytest.fixture
def bare(tmp_path: Path) -> Iterator[Bare]:
    venv = bare_venv()
    (tmp_path / "home").mkdir()
    shutil.copy(REPO_ROOT / "examples" / "plans" / "diamond.yaml", tmp_path / "diamond.yaml")
    yield Bare(venv, tmp_path)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a refused command (exit 2), its whole stderr."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_the_bare_install_has_no_extra(bare: Bare) -> None:
    """Else the tests below would prove nothing about the default install."""
    python = str(bare.venv / "bin" / "python")
    for module in EXTRA_MODULES:
        found = subprocess.run([python, "-c", f"import {module}"], capture_output=True, check=False)
        assert found.returncode != 0, f"{module} is installed in {bare.venv}"


def test_validate_and_run_with_no_stack(bare: Bare) -> None:
    valid = bare.run("validate", "diamond.yaml")
    assert valid.returncode == 0, valid.stderr
    assert "valid, 4 nodes" in valid.stdout
    ran = bare.run("run", "diamond.yaml", "--json")  # starts and stops an embedded stack
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["status"] == "succeeded"


def test_up_run_status_trace_and_stop(bare: Bare) -> None:
    up = bare.up()
    try:
        wait_until(lambda: read_stack(bare.workdir / "data"), timeout=UP_READY_TIMEOUT_S, what="up")
        ran = bare.run("run", "diamond.yaml", "--json")
        assert ran.returncode == 0, ran.stderr
        run_id = json.loads(ran.stdout)["run_id"]
        status = bare.run("status", run_id)
        assert status.returncode == 0 and "succeeded" in status.stdout, status.stderr
        svg = bare.run("trace", run_id, "--output", "t.svg")
        assert svg.returncode == 0, svg.stderr
        assert "<svg" in (bare.workdir / "t.svg").read_text()[:500]
        as_json = bare.run("trace", run_id, "--format", "json")
        assert as_json.returncode == 0, as_json.stderr
        assert json.loads(as_json.stdout)["run_id"] == run_id
        png = bare.run("trace", run_id, "--output", "t.png")
        assert "pip install 'dagwright[charts]'" in one_line(png)
        assert not (bare.workdir / "t.png").exists()
    finally:
        os.killpg(up.pid, signal.SIGINT)  # Ctrl-C, as a person stops it
        try:
            _, stderr = up.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(up.pid, signal.SIGKILL)
            raise
    assert up.returncode == 0, stderr
    assert read_stack(bare.workdir / "data") is None
    cpus = os.cpu_count()  # said, with how to change it: a run with more nodes queues
    assert f"({cpus} worker processes, one per CPU: `dagwright up --concurrency N`" in stderr


def test_each_missing_extra_says_which_to_install(bare: Bare) -> None:
    flower = bare.run("flower", "--no-auth")
    assert "pip install 'dagwright[flower]'" in one_line(flower)
    assert flower.stdout == ""  # not announced as starting first
    mcp = bare.run(
        "worker-types",
        DAGWRIGHT_MCP_SERVERS='{"time": {"command": "mcp-server-time"}}',
        DAGWRIGHT_AGENT_MCP='{"researcher": {"servers": ["time"]}}',
    )
    assert "pip install 'dagwright[mcp]'" in one_line(mcp)
    doctor = bare.run(
        "doctor",
        DAGWRIGHT_SANDBOX_BACKEND="docker",
        DAGWRIGHT_OTLP_ENDPOINT="http://127.0.0.1:9/",
    )
    assert "Traceback" not in doctor.stderr, doctor.stderr
    lines = doctor.stdout.splitlines()
    assert any("pip install 'dagwright[docker]'" in line for line in lines), doctor.stdout
    otlp = [line for line in lines if "otlp" in line]
    assert len(otlp) == 1 and "pip install 'dagwright[opentelemetry]'" in otlp[0], doctor.stdout
