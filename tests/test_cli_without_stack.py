"""Every command that reads the state store, with no stack running and no Redis
configured, says so in the one line every other does (``NO_REDIS_HINT``: start `up`, or
set DAGWRIGHT_REDIS_URL), exit 2 (issue 32: `runs` used to say "no Redis configured")."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagwright.connection import NO_REDIS_HINT
from tests.support.cli import cli_env, dagwright, one_error_line

READ_COMMANDS = [
    ["runs"],
    ["status", "r1"],
    ["watch", "r1"],
    ["result", "r1"],
    ["trace", "r1"],
    ["dlq", "list"],
    ["approvals", "list"],
    ["schedule", "list"],
    ["evals", "list"],
]


@pytest.mark.subprocess
@pytest.mark.parametrize("args", READ_COMMANDS, ids=" ".join)
def test_a_read_command_without_a_stack_gives_the_one_hint(args: list[str], tmp_path: Path) -> None:
    result = dagwright(*args, env=cli_env(None, tmp_path / "data", HOME=str(tmp_path)))
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert one_error_line(result) == NO_REDIS_HINT
