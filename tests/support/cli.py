"""Running the real ``dagwright`` command in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from dagwright.settings import Settings
from tests.support.processes import REPO_ROOT, settings_env


def cli_env(settings: Settings | None, data_dir: Path, **extra: str) -> dict[str, str]:
    """Environment of a CLI run: the test settings (or none at all) and a private data dir."""
    if settings is None:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("DAGWRIGHT_", "ANTHROPIC_"))
        }
    else:
        env = settings_env(settings)
        env.pop("DAGWRIGHT_IMPORTS")
    env["DAGWRIGHT_DATA_DIR"] = str(data_dir)
    env["COLUMNS"] = "200"
    env.update(extra)
    return env


def dagwright(
    *args: str, env: dict[str, str], timeout: float = 120, cwd: Path = REPO_ROOT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dagwright", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def json_out(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.stdout.count("\n") == 1, result.stdout + result.stderr
    return json.loads(result.stdout)


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single line a failed command prints, checked to be the whole of stderr."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    return lines[0].removeprefix("error: ")
