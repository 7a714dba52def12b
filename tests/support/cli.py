"""Running the real ``dagwright`` command in a subprocess; checking a command line against
the CLI's parser without running it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import typer.main
from typer.exceptions import TyperException

from dagwright.cli import app
from dagwright.errors import ConfigurationError
from dagwright.settings import Settings
from dagwright.tasks import queues_for
from dagwright.workers import builtin_registry
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


def cli_problem(argv: list[str], *, plugins: bool = False) -> str | None:
    """Why ``dagwright <argv>`` would be refused by the CLI, or None if it parses: the
    command exists and its options and values are accepted, and `worker --type` names a
    registered worker type (or `orchestrator`), unless modules that may register more are
    imported (``plugins``: DAGWRIGHT_IMPORTS set, or ``--import``). Nothing is run.

    Typer ships its own copy of click, hence the duck typing: a group has ``commands``.
    """
    command: Any = typer.main.get_command(app)
    words = list(argv)
    path = "dagwright"
    while hasattr(command, "commands"):
        if not words:
            return f"`{path}` needs a sub-command"
        name = words.pop(0)
        if name not in command.commands:
            return f"`{path} {name}`: no such command"
        command, path = command.commands[name], f"{path} {name}"
    try:
        context = command.make_context(path, words)
    except TyperException as exc:  # click's UsageError and BadParameter derive from it
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        return f"`{path} {' '.join(words)}`: {message}"
    if path == "dagwright worker" and not (plugins or context.params.get("imports")):
        try:
            queues_for(context.params.get("worker_types"), builtin_registry())
        except ConfigurationError as exc:  # what the command itself refuses before starting
            return f"`{path} {' '.join(words)}`: {exc}"
    return None
