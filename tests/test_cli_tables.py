"""Tables at 80 columns: ids whole, text wrapped at words (never a column of letters),
columns left out last and said so, ``--wide`` for everything.

The layout is checked on a recording console; the commands people list things with are
run for real, at COLUMNS=80, against a worker with a dead letter and an approval waiting.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from dagwright.cli.tables import Column, FittedTable, Kind
from dagwright.settings import Settings
from tests.support.cli import cli_env, dagwright, json_out
from tests.support.waiting import wait_until

ERROR = "PermanentError: no customer 42 in the billing database, permanently gone"


def printed(table: FittedTable, width: int, *, wide: bool = False) -> tuple[list[str], str]:
    """The table's lines at ``width`` columns, and what it noted."""
    out, notes = io.StringIO(), io.StringIO()
    table.print(
        Console(file=out, width=width, highlight=False, soft_wrap=True),
        wide=wide,
        notes=Console(file=notes, width=width),
    )
    return [line.rstrip() for line in out.getvalue().splitlines()], notes.getvalue()


def letters(run_id: str = "06h2ayb3c7nszt6v38dx") -> FittedTable:
    table = FittedTable(
        [
            Column("id", Kind.ID),
            Column("run", Kind.ID),
            Column("error", Kind.TEXT, min_width=20),
            Column("status", optional=True),
            Column("failed", optional=True),
        ]
    )
    table.add_row("1795925044608-0", run_id, ERROR, "pending", "2026-11-29 04:04:04")
    return table


def assert_words_whole(lines: list[str], text: str) -> None:
    """Every word of ``text`` is on one line: wrapped at spaces, never inside a word."""
    shown = " ".join(lines)
    for word in text.split():
        assert re.search(rf"(^|\s){re.escape(word)}(\s|$)", shown), word


def test_ids_stay_whole_and_text_wraps_at_words_within_80_columns() -> None:
    lines, notes = printed(letters(), 80)
    assert all(len(line) <= 80 for line in lines), lines
    assert "1795925044608-0" in lines[1] and "06h2ayb3c7nszt6v38dx" in lines[1]
    assert_words_whole(lines[1:], ERROR)
    assert "failed" in notes and "--wide" in notes  # what did not fit is said


def test_optional_columns_stay_when_there_is_room() -> None:
    lines, notes = printed(letters(), 200)
    assert lines[0].split() == ["id", "run", "error", "status", "failed"]
    assert ERROR in lines[1] and notes == ""


def test_text_goes_under_its_row_when_ids_leave_it_no_room() -> None:
    long_run = "r" * 56
    lines, _ = printed(letters(long_run), 80)
    assert lines[0].split() == ["id", "run"]
    assert lines[1].split() == ["1795925044608-0", long_run]
    assert lines[2].startswith("  PermanentError:") and all(len(line) <= 80 for line in lines)
    assert_words_whole(lines[2:], ERROR)


def test_ids_wider_than_the_terminal_are_not_cut() -> None:
    long_run = "r" * 90
    lines, _ = printed(letters(long_run), 80)
    assert long_run in lines[1]


def test_wide_shows_every_column_whole() -> None:
    lines, notes = printed(letters(), 80, wide=True)
    assert lines[0].split() == ["id", "run", "error", "status", "failed"]
    assert ERROR in lines[1] and notes == ""


def test_cells_are_text_not_markup() -> None:
    table = FittedTable([Column("error", Kind.TEXT)])
    table.add_row("[bold red]not markup[/]")
    assert printed(table, 80)[0][1] == "[bold red]not markup[/]"


FAILING_AND_GATED = """
goal: a goal long enough to need wrapping in an eighty column terminal, word by word
nodes:
  - {id: lookup-customer-record, type: function, function: fail,
     params: {message: "no customer 42 in the billing database, permanently"}}
  - {id: publish-release-notes, type: function, function: concat, approval: required,
     params: {parts: ["a long part of text that the args column has to show"]}}
"""


@pytest.fixture
def env(settings: Settings, redis_client: object, worker: object, tmp_path: Path) -> dict[str, str]:
    return cli_env(settings, tmp_path / "data", COLUMNS="80")


@pytest.mark.subprocess
def test_listings_fit_80_columns_with_ids_whole(env: dict[str, str], tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(FAILING_AND_GATED)
    run_id = json_out(dagwright("run", str(plan), "--no-wait", "--json", env=env))["run_id"]
    letter_id = wait_for_letter(env)
    shown = {
        "dlq list": (["dlq", "list"], [letter_id, run_id, "lookup-customer-record"]),
        "approvals": (["approvals", "list"], [run_id, "publish-release-notes"]),
        "runs": (["runs"], [run_id]),
        "worker-types": (["worker-types"], ["workspace_write", "http_get (off here)"]),
    }
    for name, (args, ids) in shown.items():
        result = dagwright(*args, env=env)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert all(len(line) <= 80 for line in lines), (name, result.stdout)
        for whole in ids:
            assert whole in result.stdout, (name, whole, result.stdout)
    letters_shown = dagwright("dlq", "list", env=env).stdout.splitlines()
    assert_words_whole(letters_shown[1:], "no customer 42 in the billing database, permanently")
    everything = dagwright("dlq", "list", "--wide", env=env)
    assert "failed" in everything.stdout.splitlines()[0] and "left out" not in everything.stderr


def wait_for_letter(env: dict[str, str]) -> str:
    def letter() -> str | None:
        listed = json_out(dagwright("dlq", "list", "--json", env=env))
        return listed[0]["id"] if listed else None

    return wait_until(letter, timeout=60, interval=0.5, what="the failed node's dead letter")
