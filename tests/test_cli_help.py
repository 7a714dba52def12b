"""``dagwright --help`` lists the operations commands and renders every placeholder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import cli_env, dagwright


@pytest.mark.subprocess
def test_help_lists_the_operations_commands_and_keeps_angle_brackets(tmp_path: Path) -> None:
    result = dagwright("--help", env=cli_env(None, tmp_path / "data"))
    assert result.returncode == 0, result.stderr
    for command in ("watch", "flower", "reconciler"):
        assert f"\n  {command} " in result.stdout
    worker = dagwright("worker", "--help", env=cli_env(None, tmp_path / "data"))
    assert "each on its own queue (`dw.<type>`)" in worker.stdout  # markdown ate <type> once


@pytest.mark.subprocess
def test_run_help_fits_80_columns_with_every_option_name_whole(tmp_path: Path) -> None:
    import click
    import typer.main

    from dagwright.cli import app

    run = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    names = [name for param in run.params if isinstance(param, click.Option) for name in param.opts]
    result = dagwright("run", "--help", env=cli_env(None, tmp_path / "data", COLUMNS="80"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), result.stdout
    for name in names:  # rich's option panels cut them (`--budget-input-t…`)
        assert f"{name} " in result.stdout or f"{name}," in result.stdout, name
    assert len(lines) < 100  # a page of help, not rich's 129 lines of narrow columns


@pytest.mark.subprocess
def test_version_prints_the_installed_version(tmp_path: Path) -> None:
    from importlib.metadata import version

    result = dagwright("--version", env=cli_env(None, tmp_path / "data"))
    assert (result.returncode, result.stdout) == (0, f"dagwright {version('dagwright')}\n")


def test_the_license_the_package_declares_is_in_the_repository() -> None:
    root = Path(__file__).resolve().parents[1]
    assert 'license-files = ["LICENSE"]' in (root / "pyproject.toml").read_text()
    assert "Apache License" in (root / "LICENSE").read_text()[:200]
