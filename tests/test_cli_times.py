"""Times and waits as the CLI prints them for people, at 80 columns: a schedule's times to
the second in its own zone or ``--tz``'s (never ``.123456+00:00``), a dead letter's
failure times to the second, and a node waiting for approval said in words."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dagwright import Client, PlanBuilder, Settings
from dagwright.cli.clock import clock_time, zone_named
from tests.support.cli import cli_env, dagwright, one_error_line
from tests.support.waiting import wait_until

pytestmark = pytest.mark.subprocess

MICROSECONDS = re.compile(r"\d\d:\d\d:\d\d\.\d")
OFFSET = re.compile(r"[+-]\d\d:\d\d\b")


def plain(text: str) -> None:
    """No time of ``text`` shows microseconds or an ISO offset, and each line that shows a
    time fits 80 columns."""
    assert not MICROSECONDS.search(text) and not OFFSET.search(text), text
    timed = [line for line in text.splitlines() if re.search(r"\d\d:\d\d:\d\d", line)]
    assert timed and all(len(line) <= 80 for line in timed), text


def test_a_clock_time_is_to_the_second_with_the_zone_named() -> None:
    from datetime import UTC, datetime

    at = datetime(2026, 11, 30, 8, 0, 0, 123456, tzinfo=UTC)
    assert clock_time(at) == "2026-11-30 08:00:00 UTC"
    assert clock_time(at, zone_named("Europe/Paris")) == "2026-11-30 09:00:00 CET"
    assert clock_time(None) == "-"


def test_schedule_times_show_in_the_schedules_zone_or_the_one_asked_for(
    settings: Settings, redis_client: object, tmp_path: Path
) -> None:
    env = cli_env(settings, tmp_path / "data", COLUMNS="80")
    plan = tmp_path / "plan.yaml"
    plan.write_text("nodes:\n  - {id: a, type: function, function: noop}\n")
    cron = ["--cron", "0 9 * * *", "--tz", "Europe/Paris"]
    added = dagwright("schedule", "add", "daily", "--plan", str(plan), *cron, env=env)
    assert added.returncode == 0, added.stderr
    assert re.search(r"next fire: \d{4}-\d\d-\d\d 09:00:00 CES?T$", added.stderr), added.stderr

    listed = dagwright("schedule", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    plain(listed.stdout)
    assert re.search(r"09:00:00 CES?T", listed.stdout), listed.stdout  # its own zone

    in_tokyo = dagwright("schedule", "list", "--tz", "Asia/Tokyo", env=env)
    plain(in_tokyo.stdout)
    assert re.search(r"1[67]:00:00 JST", in_tokyo.stdout), in_tokyo.stdout

    fired = dagwright("schedule", "run-now", "daily", env=env)
    assert fired.returncode == 0, fired.stderr
    shown = dagwright("schedule", "show", "daily", "--tz", "UTC", env=env)
    plain(shown.stdout)
    assert re.search(r"next \d{4}-\d\d-\d\d 0[78]:00:00 UTC", shown.stdout), shown.stdout
    run_id = fired.stdout.strip()
    assert re.search(rf"\d\d:\d\d:\d\d UTC started {run_id}", shown.stdout), shown.stdout

    wrong = dagwright("schedule", "show", "daily", "--tz", "Mars/Olympus", env=env)
    assert wrong.returncode == 2
    assert "unknown time zone 'Mars/Olympus'" in one_error_line(wrong)


def test_a_dead_letters_times_print_to_the_second(
    settings: Settings, client: Client, worker: object, tmp_path: Path
) -> None:
    plan = PlanBuilder("fails for good")
    plan.function("fix", "broken_until_fixed")
    client.submit(plan.build()).wait(timeout=30)
    [letter] = client.dlq.list()
    env = cli_env(settings, tmp_path / "data", COLUMNS="80")
    shown = dagwright("dlq", "show", letter.id, env=env)
    assert shown.returncode == 0, shown.stderr
    plain(shown.stdout)
    assert f"last failure {clock_time(letter.last_failure_at)}" in shown.stdout
    stats = dagwright("dlq", "stats", env=env)
    plain(stats.stdout)
    assert f"newest {clock_time(letter.last_failure_at)}" in stats.stdout


def test_a_node_waiting_for_approval_says_who_it_waits_for(
    settings: Settings, client: Client, worker: object, tmp_path: Path
) -> None:
    plan = PlanBuilder("Release once approved")
    plan.node(
        "deploy", "function", function="concat", params={"parts": ["v1"]}, approval="required"
    )
    run = client.submit(plan.build())
    wait_until(lambda: client.approvals.list(run.run_id), timeout=30, what="deploy waiting")
    env = cli_env(settings, tmp_path / "data", COLUMNS="80")

    status = dagwright("status", run.run_id, env=env)
    assert status.returncode == 0, status.stderr
    [row] = [line for line in status.stdout.splitlines() if line.startswith("deploy")]
    assert "waits for a person's" in row

    listed = dagwright("approvals", "list", env=env)
    assert all(len(line) <= 80 for line in listed.stdout.splitlines()), listed.stdout
    [header, row] = listed.stdout.splitlines()[:2]
    assert "waits to" in header and "start (function)" in row

    approved = dagwright("approve", run.run_id, "deploy", env=env)
    assert approved.stdout.startswith(
        f"approved the start of function node deploy of run {run.run_id}"
    )
