"""``dagwright --help`` lists the operations commands and renders every placeholder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import cli_env, dagwright


@pytest.mark.subprocess
def test_help_lists_the_operations_commands_and_keeps_angle_brackets(tmp_path: Path) -> None:
    result = dagwright("--help", env=cli_env(None, tmp_path / "data"))
    assert result.returncode == 0, result.stderr
    assert "each on its own queue (dw.<type>)" in result.stdout  # markdown ate <type> once
    for command in ("watch", "flower", "reconciler"):
        assert f"│ {command} " in result.stdout


@pytest.mark.subprocess
def test_version_prints_the_installed_version(tmp_path: Path) -> None:
    from importlib.metadata import version

    result = dagwright("--version", env=cli_env(None, tmp_path / "data"))
    assert (result.returncode, result.stdout) == (0, f"dagwright {version('dagwright')}\n")


def test_the_license_the_package_declares_is_in_the_repository() -> None:
    root = Path(__file__).resolve().parents[1]
    assert 'license-files = ["LICENSE"]' in (root / "pyproject.toml").read_text()
    assert "Apache License" in (root / "LICENSE").read_text()[:200]
