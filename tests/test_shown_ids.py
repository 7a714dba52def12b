"""Ids from outside are cut where they are echoed: a 1 MB run id, node id, schedule name,
dead-letter id or task id gives a short line, on the real command, the Python client and a
real worker's log (real Valkey)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dagwright import Client, Settings
from dagwright.errors import DagwrightError
from dagwright.keys import NODE_EXECUTE_TASK, node_task_id, queue_for
from dagwright.shown_ids import MAX_SHOWN_ID_CHARS, shown_id
from dagwright.tasks import build_app
from tests.support.cli import cli_env, dagwright, one_error_line
from tests.support.processes import REPO_ROOT, Workers
from tests.support.waiting import wait_until

HUGE_ID = "r" * 1_000_000 + "-end"  # 1 MB and a bit
CUT = f"{'r' * MAX_SHOWN_ID_CHARS}…(1,000,004 chars)"
SHORT_LINE_CHARS = 400  # room for the message around one cut id


def test_shown_id_keeps_real_ids_whole_cuts_huge_ones_and_escapes_line_breaks() -> None:
    longest_task_id = node_task_id("06h13s9qj8y4t0v7n9r2", "n" * 64, 12)
    assert shown_id(longest_task_id) == longest_task_id
    assert shown_id(HUGE_ID) == CUT
    assert shown_id("forged\nINFO all is well") == "forged\\nINFO all is well"


def dagwright_in_one_process(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The real command with an argument longer than Linux lets a command line carry
    (128 KiB a word): the process sets its own argv, then runs the CLI's main."""
    code = (
        "import json, sys; from dagwright.cli import main; "
        "sys.argv = ['dagwright', *json.loads(sys.stdin.read())]; main()"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(args),
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("command", ["status", "events", "watch", "result", "cancel"])
def test_a_1mb_run_id_gives_one_short_error_line_and_exit_2(
    settings: Settings, tmp_path: Path, command: str
) -> None:
    refused = dagwright_in_one_process(cli_env(settings, tmp_path), command, HUGE_ID)
    assert refused.returncode == 2, refused.stderr[:1000]
    line = one_error_line(refused)
    assert line.startswith(f"no run '{CUT}' here") and len(line) < SHORT_LINE_CHARS


def test_a_plan_file_with_huge_ids_is_refused_in_one_short_line(
    settings: Settings, tmp_path: Path
) -> None:
    env = cli_env(settings, tmp_path)
    bad_id = {"nodes": [{"id": HUGE_ID, "type": "function", "function": "count"}]}
    bad_refs = {
        "nodes": [{"id": "a", "type": HUGE_ID, "depends_on": [HUGE_ID]}],
        "output": HUGE_ID,
    }
    for plan in (bad_id, bad_refs):
        path = tmp_path / "plan.json"
        path.write_text(json.dumps(plan))
        refused = dagwright("validate", str(path), env=env)
        assert refused.returncode == 2
        # every problem listed, one short line each: cut where shown, or refused by the
        # id's length limit without being shown
        lines = problem_lines(refused)
        for line in lines:
            assert len(line) < SHORT_LINE_CHARS + len(str(path)) and HUGE_ID not in line
        assert len(lines) == 1 if plan is bad_id else len(lines) > 2


def problem_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The problems `validate` lists: one error line, or a heading and one line each."""
    lines = result.stderr.strip().splitlines()
    if len(lines) == 1:
        return [one_error_line(result)]
    assert lines[0].startswith("error: ") and lines[0].endswith(f" {len(lines) - 1} problems:")
    assert all(line.startswith("  - ") for line in lines[1:]), result.stderr
    return [line.removeprefix("  - ") for line in lines[1:]]


def test_the_client_cuts_every_kind_of_id_it_refuses(client: Client) -> None:
    refusals = [
        lambda: client.status(HUGE_ID),
        lambda: client.events(HUGE_ID),
        lambda: client.dlq.get(HUGE_ID),
        lambda: client.dlq.purge(HUGE_ID),
        lambda: client.schedules.get(HUGE_ID),
        lambda: client.schedules.remove(HUGE_ID),
        lambda: client.approvals.approve(HUGE_ID, HUGE_ID),
    ]
    for refuse in refusals:
        with pytest.raises(DagwrightError) as refused:
            refuse()
        assert CUT in str(refused.value) and len(str(refused.value)) < 2 * SHORT_LINE_CHARS


def test_a_forged_message_with_a_long_run_id_is_logged_cut_by_the_worker(
    subprocess_settings: Settings, workers: Workers
) -> None:
    worker = workers.start(subprocess_settings)
    app = build_app(subprocess_settings)
    # 30,000 characters: a body the worker still reads (a 1 MB one is refused unread, as a
    # malformed message), so the id reaches the lines that echo it
    long_id = "r" * 30_000
    task_id = node_task_id(long_id, "n", 1)
    app.send_task(
        NODE_EXECUTE_TASK, args=[long_id, "n", 1], queue=queue_for("function"), task_id=task_id
    )
    app.send_task(NODE_EXECUTE_TASK, args=[HUGE_ID, "n", 1], queue=queue_for("function"))

    def log_of_the_drops() -> str | None:
        log = worker.log_path.read_text(errors="replace")
        dropped = "dropping stale message" in log and "succeeded in" in log
        return log if dropped and "dropped a malformed message" in log else None

    log = wait_until(log_of_the_drops, timeout=60, interval=0.2, what="the worker's log lines")
    [dropped] = [line for line in log.splitlines() if "dropping stale message" in line]
    cut = f"{'r' * MAX_SHOWN_ID_CHARS}…({len(long_id):,} chars)"
    assert f"{cut}/n (fence 1)" in dropped and len(dropped) < SHORT_LINE_CHARS
    task_lines = [line for line in log.splitlines() if "dagwright.node.execute[" in line]
    cut_task_id = f"[{'r' * MAX_SHOWN_ID_CHARS}…({len(task_id):,} chars)]"
    assert len(task_lines) >= 2  # Celery's own: received, then succeeded
    assert all(cut_task_id in line and len(line) < SHORT_LINE_CHARS for line in task_lines)
    assert "r" * (MAX_SHOWN_ID_CHARS + 1) not in log  # neither id is anywhere whole
