"""CLI output pieces: one-line logs, plain progress when stderr is not a terminal."""

from __future__ import annotations

import io
import logging

import pytest
from rich.console import Console

from dagwright.cli import OneLineFormatter
from dagwright.cli import output as cli_output
from dagwright.cli.tables import FittedTable
from dagwright.models import RunCounts, RunStatus


def test_logged_exceptions_are_one_line() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(OneLineFormatter("%(levelname)s %(message)s"))
    log = logging.getLogger("test.oneline")
    log.addHandler(handler)
    try:
        raise ConnectionError("broker gone")
    except ConnectionError:
        log.warning("publish failed", exc_info=True)
    assert stream.getvalue() == "WARNING publish failed (ConnectionError: broker gone)\n"


def test_plain_progress_prints_at_once_then_every_few_seconds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    counts = RunCounts(total=4, done=1, running=2)
    with cli_output.ProgressDisplay("r1", enabled=True) as progress:
        progress.update(RunStatus.RUNNING, counts)
        progress.update(RunStatus.RUNNING, counts)  # within the period: not printed again
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("run r1 running · 1/4 nodes done · 2 running · 0 failed")


def test_disabled_progress_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with cli_output.ProgressDisplay("r1", enabled=False) as progress:
        progress.update(RunStatus.RUNNING, RunCounts(total=1))
    assert capsys.readouterr().err == ""


def rendered(table: FittedTable, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, highlight=False)
    table.print(console)
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


@pytest.mark.parametrize("width", [60, 80])
def test_ids_in_tables_are_never_cut_or_wrapped_on_a_narrow_terminal(width: int) -> None:
    """The ids a person copies into `approve`, `dlq replay`, `status` stay whole."""
    from datetime import UTC, datetime, timedelta

    from dagwright.cli.approvals import approvals_table
    from dagwright.cli.dlq import letters_table
    from dagwright.dlq.entries import Classification, DeadLetter
    from dagwright.models import Approval

    now = datetime.now(UTC)
    run_id, node_id = "06h14s3cgtx3s5gv1vbk", "research_the_competitors_pricing"
    approval = Approval(
        id="a1", run_id=run_id, node=node_id, kind="tool", action="workspace_write",
        args={"path": "notes.md", "content": "x" * 300}, requested_at=now,
        deadline=now + timedelta(hours=1),
    )  # fmt: skip
    letter = DeadLetter(
        id="1764060000000-0", run_id=run_id, node_id=node_id, fence=1, worker_type="researcher",
        spec={}, attempts=3, classification=Classification("transient"),
        error_class="LLMUnavailableError", message="overloaded " * 20, traceback="",
        first_failure_at=now, last_failure_at=now,
    )  # fmt: skip
    for table in (approvals_table([approval]), letters_table([letter])):
        text = rendered(table, width)
        for whole in (run_id, node_id):
            assert whole in text, text


def test_event_fields_that_are_numbers_are_typed_and_others_stay_text() -> None:
    from datetime import UTC, datetime

    from dagwright.models import Event

    event = Event(
        id="1-0", run_id="r", kind="llm.call", at=datetime.now(UTC), node="n",
        data={"model": "claude-x", "input_tokens": "120", "cost_usd": "0.0031",
              "attempt": "not a number", "holder": "12"},
    )  # fmt: skip
    assert event.typed_data() == {
        "model": "claude-x", "input_tokens": 120, "cost_usd": 0.0031,
        "attempt": "not a number", "holder": "12",
    }  # fmt: skip


def test_a_plan_tree_names_each_handlers_rule() -> None:
    from pathlib import Path

    from dagwright.plans.files import load_plan

    examples = Path(__file__).resolve().parents[1] / "examples" / "plans"
    plan = load_plan(examples / "cleanup_on_failure.yaml")
    console = Console(width=200, record=True, color_system=None)
    console.print(cli_output.plan_tree(plan))
    lines = console.export_text().splitlines()
    assert any("cleanup function" in line and "run_if: any_failed" in line for line in lines)
    assert not any("publish" in line and "run_if" in line for line in lines)
