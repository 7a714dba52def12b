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
