"""CLI output pieces: one-line logs, plain progress when stderr is not a terminal."""

from __future__ import annotations

import io
import logging

import pytest

from dagwright.cli import OneLineFormatter
from dagwright.cli import output as cli_output
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
