"""Schedules with a real beat (``dagwright beat``), real workers and a real Valkey."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest

from dagwright import Client, Settings
from dagwright.errors import ScheduleError
from dagwright.schedules.store import Fire
from dagwright.testing import FakeAnthropicServer
from dagwright.testing.fake_anthropic_script import text_of
from tests.support.cli import cli_env, dagwright, json_out, one_error_line
from tests.support.llm_script import agent_node, answers, planned
from tests.support.processes import Workers
from tests.support.runstate import RecordingBroker
from tests.support.settings import make_settings
from tests.support.untrusted import without_tokens
from tests.support.valkey import RestartableValkey
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

NOOP = {"nodes": [{"id": "a", "type": "function", "function": "noop"}]}
SLEEP = {
    "nodes": [{"id": "nap", "type": "function", "function": "sleep", "params": {"seconds": 4}}]
}


def started(client: Client, name: str) -> list[Fire]:
    """The fires that started a run, oldest first."""
    fires = client.schedules.get(name, history=100).history
    return [fire for fire in reversed(fires) if fire.outcome == "started"]


def wait_for_fires(client: Client, name: str, count: int, timeout: float = 30) -> list[Fire]:
    return wait_until(
        lambda: (fires := started(client, name)) and len(fires) >= count and fires,
        timeout=timeout,
        what=f"{count} runs started by {name}",
    )


def ticks(fires: list[Fire]) -> list[float]:
    return [float(fire.tick) for fire in fires]


def tick_gaps(fires: list[Fire]) -> list[float]:
    """Seconds between consecutive ticks, in tick order: two ticks' fires are tasks on
    different worker processes, and under load the later tick may take the schedule's
    firing lock (and be recorded) first."""
    in_order = sorted(ticks(fires))
    return [b - a for a, b in itertools.pairwise(in_order)]


def test_an_interval_schedule_fires_on_time_pauses_and_resumes(
    subprocess_settings: Settings, workers: Workers
) -> None:
    workers.start(subprocess_settings)
    workers.start_beat(subprocess_settings)
    client = Client(subprocess_settings)
    client.schedules.add("every-two", every_s=2, plan=NOOP)

    fires = wait_for_fires(client, "every-two", 3)
    gaps = tick_gaps(fires)
    # on the 2 s grid; a tick a loaded machine's beat reached too late is skipped (catchup:
    # skip), never fired late: 4 s then
    assert all(gap >= 1.8 and abs(gap - 2 * round(gap / 2)) <= 0.4 for gap in gaps), gaps
    assert all(fire.fired_at.timestamp() - float(fire.tick) < 1.5 for fire in fires)  # on time
    for fire in fires:
        assert client.wait(fire.run_id, timeout=30).status.value == "succeeded"

    client.schedules.pause("every-two")
    paused_at = len(started(client, "every-two"))
    time.sleep(5)  # proving nothing fires for two periods (a sleep is the test here)
    assert len(started(client, "every-two")) <= paused_at + 1  # one may have been in flight
    assert client.schedules.get("every-two").next_fire_at is None

    settled = len(started(client, "every-two"))
    client.schedules.resume("every-two")
    wait_for_fires(client, "every-two", settled + 1, timeout=15)


def test_overlap_skip_starts_no_second_run_while_one_runs(
    subprocess_settings: Settings, workers: Workers
) -> None:
    workers.start(subprocess_settings)
    workers.start_beat(subprocess_settings)
    client = Client(subprocess_settings)
    client.schedules.add("slow", every_s=1, plan=SLEEP)  # a 4 s run, a tick a second
    wait_until(
        lambda: sum(f.outcome == "skipped" for f in client.schedules.get("slow").history) >= 3,
        timeout=30,
        what="ticks skipped while the first run runs",
    )
    client.schedules.pause("slow")
    fires = client.schedules.get("slow", history=100).history
    skipped = [f for f in fires if f.outcome == "skipped"]
    assert all("still running" in f.reason for f in skipped), skipped
    runs = [client.status(f.run_id) for f in reversed(fires) if f.run_id]
    for earlier, later in itertools.pairwise(runs):
        earlier_done = client.wait(earlier.run_id, timeout=30)
        assert earlier_done.finished_at is not None and later.created_at >= earlier_done.finished_at


def test_a_killed_beat_is_replaced_and_no_tick_fires_twice(
    subprocess_settings: Settings, workers: Workers
) -> None:
    workers.start(subprocess_settings)
    first = workers.start_beat(subprocess_settings)
    client = Client(subprocess_settings)
    client.schedules.add("failover", every_s=1, plan=NOOP)
    wait_for_fires(client, "failover", 2)
    standby = workers.start_beat(subprocess_settings)  # a standby: blocks on the beat lock
    wait_until(
        lambda: "beat: Starting..." in standby.log_path.read_text(errors="replace"),
        timeout=30,
        what="the standby beat to start (it goes for the lock next)",
    )
    first.kill_all()
    count = len(started(client, "failover"))
    # The standby takes the lock once it times out (3 s here) and goes on firing.
    wait_for_fires(client, "failover", count + 3, timeout=30)
    fires = started(client, "failover")
    assert len({fire.tick for fire in fires}) == len(fires)  # no tick fired twice
    gaps = tick_gaps(fires)
    assert min(gaps) >= 0.9, gaps
    assert len({fire.run_id for fire in fires}) == len(fires)


@pytest.mark.subprocess
def test_an_invalid_schedule_is_refused_with_one_clear_line(
    settings: Settings, redis_client: object, tmp_path: Path
) -> None:
    env = cli_env(settings, tmp_path / "data")
    for args, message in (
        (["--cron", "61 * * * *"], "invalid cron expression '61 * * * *'"),
        (["--cron", "0 9 * *"], "it needs 5 fields"),
        (["--cron", "0 9 * * *", "--tz", "Mars/Olympus"], "unknown timezone 'Mars/Olympus'"),
        (["--every", "5", "--overlap", "sometimes"], "overlap"),
        ([], "give either a cron expression or an interval"),
    ):
        result = dagwright("schedule", "add", "bad", "a goal", *args, env=env)
        assert result.returncode == 2 and message in one_error_line(result), result.stderr
    assert json_out(dagwright("schedule", "list", "--json", env=env)) == []
    with pytest.raises(ScheduleError, match="no schedule 'ghost'"):
        Client(settings).schedules.get("ghost")


@pytest.mark.subprocess
def test_the_schedule_commands(
    settings: Settings, redis_client: object, worker: object, tmp_path: Path
) -> None:
    env = cli_env(settings, tmp_path / "data")
    plan = tmp_path / "plan.yaml"
    plan.write_text("nodes:\n  - {id: a, type: function, function: noop}\n")
    added = dagwright(
        "schedule",
        "add",
        "daily",
        "--plan",
        str(plan),
        "--cron",
        "0 9 * * 1-5",
        "--tz",
        "Europe/Paris",
        "--json",
        env=env,
    )
    assert added.returncode == 0, added.stderr
    assert json_out(added)["cron"] == "0 9 * * 1-5"
    again = dagwright("schedule", "add", "daily", "--plan", str(plan), "--every", "60", env=env)
    assert again.returncode == 2 and "exists already" in one_error_line(again)

    [listed] = json_out(dagwright("schedule", "list", "--json", env=env))
    next_fire = listed["next_fire_at"]
    assert listed["name"] == "daily" and next_fire is not None
    assert next_fire.endswith("+00:00") and next_fire[11:16] in ("07:00", "08:00")  # 9:00 Paris

    now = dagwright("schedule", "run-now", "daily", "--json", env=env)
    assert now.returncode == 0, now.stderr
    run_id = json_out(now)["run_id"]
    assert Client(settings).wait(run_id, timeout=30).status.value == "succeeded"
    shown = json_out(dagwright("schedule", "show", "daily", "--json", env=env))
    assert shown["last_run_id"] == run_id and shown["last_run_status"] == "succeeded"

    assert dagwright("schedule", "pause", "daily", env=env).returncode == 0
    assert json_out(dagwright("schedule", "show", "daily", "--json", env=env))["paused"] is True
    assert dagwright("schedule", "resume", "daily", env=env).returncode == 0
    assert dagwright("schedule", "remove", "daily", env=env).returncode == 0
    gone = dagwright("schedule", "show", "daily", env=env)
    assert gone.returncode == 2 and "no schedule 'daily'" in one_error_line(gone)


def test_schedules_survive_a_valkey_restart(
    tmp_path: Path, fake_llm_server: FakeAnthropicServer, workers: Workers
) -> None:
    valkey = RestartableValkey(tmp_path / "valkey")
    try:
        settings = make_settings(
            valkey.server, fake_llm_server, tmp_path / "data", state_db=0, broker_db=1
        )
        workers.start(settings)
        workers.start_beat(settings)
        client = Client(settings)
        client.schedules.add("durable", every_s=1, plan=NOOP)
        wait_for_fires(client, "durable", 2)
        valkey.restart()
        client = Client(settings)
        assert [info.schedule.name for info in client.schedules.list()] == ["durable"]
        count = len(started(client, "durable"))
        wait_for_fires(client, "durable", count + 2, timeout=60)
        assert all(process.process.poll() is None for process in workers)  # beat too
    finally:
        workers.stop_all()
        valkey.stop()


def test_fire_policies_tick_dedup_catch_up_and_overlap(no_worker_settings: Settings) -> None:
    from dagwright.orchestrator.runtime import Runtime
    from dagwright.schedules.definition import parse_schedule
    from dagwright.schedules.firing import fire_schedule
    from dagwright.schedules.store import schedule_store

    runtime = Runtime.from_settings(no_worker_settings)
    store = schedule_store(runtime)
    broker = RecordingBroker()

    def add(name: str, **fields: object) -> None:
        store.save(parse_schedule({"name": name, "every_s": 60, "plan": NOOP, **fields}))

    now = time.time()
    add("dedup")
    first = fire_schedule(runtime, broker, "dedup", f"{now:.3f}")
    second = fire_schedule(runtime, broker, "dedup", f"{now:.3f}")  # another beat, same tick
    assert first.outcome == "started" and second.outcome == "skipped"
    assert "fired already" in second.reason

    add("late-skip")
    late = fire_schedule(runtime, broker, "late-skip", f"{now - 3600:.3f}")
    assert late.outcome == "skipped" and "missed by" in late.reason
    add("late-once", catchup="once")
    assert fire_schedule(runtime, broker, "late-once", f"{now - 3600:.3f}").outcome == "started"

    add("skipper")  # the first run never finishes here: no worker
    assert fire_schedule(runtime, broker, "skipper", f"{now:.3f}").outcome == "started"
    busy = fire_schedule(runtime, broker, "skipper", f"{now + 60:.3f}")
    assert busy.outcome == "skipped" and "still running" in busy.reason

    add("canceller", overlap="cancel")
    previous = fire_schedule(runtime, broker, "canceller", f"{now:.3f}")
    replacing = fire_schedule(runtime, broker, "canceller", f"{now + 60:.3f}")
    assert replacing.outcome == "started" and previous.run_id in replacing.reason
    assert runtime.store.run_status(previous.run_id).value == "cancelled"

    add("allower", overlap="allow")
    assert fire_schedule(runtime, broker, "allower", f"{now:.3f}").outcome == "started"
    assert fire_schedule(runtime, broker, "allower", f"{now + 60:.3f}").outcome == "started"

    add("paused", paused=True)
    assert fire_schedule(runtime, broker, "paused", f"{now:.3f}").reason == "the schedule is paused"
    manual = fire_schedule(runtime, broker, "paused", "manual-1", manual=True)
    assert manual.outcome == "started"  # run-now runs a paused schedule


def test_follow_ups_are_queued_within_the_schedule_s_limits(no_worker_settings: Settings) -> None:
    from dagwright.orchestrator.runtime import Runtime
    from dagwright.schedules.definition import parse_schedule
    from dagwright.schedules.firing import fire_schedule
    from dagwright.schedules.followups import propose_followup
    from dagwright.schedules.store import schedule_store

    runtime = Runtime.from_settings(no_worker_settings)
    store = schedule_store(runtime)
    broker = RecordingBroker()
    store.save(parse_schedule({"name": "digest", "every_s": 60, "plan": NOOP, "max_followups": 2}))
    store.save(parse_schedule({"name": "closed", "every_s": 60, "plan": NOOP}))
    scheduled = fire_schedule(runtime, broker, "digest", f"{time.time():.3f}").run_id

    first = propose_followup(runtime, broker, scheduled, "Check the failing build again", "red")
    followup = first.removeprefix("queued follow-up run ")
    assert runtime.store.read_state(followup).goal == "Check the failing build again"
    again = propose_followup(runtime, broker, scheduled, "Check the failing build again", "")
    assert again == f"this follow-up was queued already: run {followup}"  # a retried node
    propose_followup(runtime, broker, scheduled, "Tell the owner", "")
    with pytest.raises(ScheduleError, match="queued its 2 follow-up"):
        propose_followup(runtime, broker, scheduled, "One too many", "")
    with pytest.raises(ScheduleError, match="a follow-up 1 deep"):
        propose_followup(runtime, broker, followup, "Follow the follow-up", "")
    fires = store.history("digest")
    assert [f.reason for f in fires if f.tick.startswith("followup-of-")][-1].startswith(
        f"follow-up of {scheduled}: red"
    )

    closed = fire_schedule(runtime, broker, "closed", f"{time.time():.3f}").run_id
    with pytest.raises(ScheduleError, match="allows no follow-up runs"):
        propose_followup(runtime, broker, closed, "More", "")
    unscheduled = Client(no_worker_settings).submit(NOOP).run_id
    with pytest.raises(ScheduleError, match="this run has none"):
        propose_followup(runtime, broker, unscheduled, "More", "")


def test_a_scheduled_writer_proposes_a_follow_up_run_whose_goal_its_agents_take_as_data(
    settings: Settings, redis_client: object, worker: object, fake_llm: FakeAnthropicServer
) -> None:
    """A model wrote the follow-up's goal: its agents see it fenced, not as instructions."""
    fake_llm.add(
        {
            "match": {"system_contains": "You are the writer", "messages_count": 1},
            "reply": {
                "content": [
                    {
                        "type": "tool_use",
                        "name": "propose_followup",
                        "input": {"goal": "Re-check the outage tomorrow", "reason": "unresolved"},
                    }
                ]
            },
        },
        {
            "match": {"system_contains": "You are the writer", "messages_count": 3},
            "reply": {"content": [{"type": "text", "text": "Report written."}]},
        },
        planned(agent_node("recheck", "researcher", "Re-check the outage.")),
        answers("researcher", "Still down.", "Re-check the outage."),
    )
    client = Client(settings)
    plan = {"nodes": [{"id": "report", "type": "writer", "instruction": "Write the report."}]}
    client.schedules.add("reports", every_s=3600, plan=plan, max_followups=1)
    fire = client.schedules.run_now("reports")
    assert client.wait(fire.run_id, timeout=60).result == "Report written."
    [followup] = [
        f for f in client.schedules.get("reports").history if f.tick.startswith("followup")
    ]
    assert client.status(followup.run_id).goal == "Re-check the outage tomorrow"
    assert client.wait(followup.run_id, timeout=60).result == "Still down."
    researcher = fake_llm.requests[-1].body
    assert "Re-check the outage tomorrow" not in text_of(researcher["system"])
    first = without_tokens(text_of(researcher["messages"][0]["content"]))
    assert '<untrusted_input_T source="goal">\nRe-check the outage tomorrow\n' in first


def test_ticks_fired_at_once_start_one_run_under_overlap_skip(no_worker_settings: Settings) -> None:
    """Ticks that pile up (a worker that was down) are handled together: before the
    fire lock, each saw no run in progress and started one (CI saw two runs at once)."""
    from concurrent.futures import ThreadPoolExecutor

    from dagwright.orchestrator.runtime import Runtime
    from dagwright.schedules.definition import parse_schedule
    from dagwright.schedules.firing import fire_schedule
    from dagwright.schedules.store import schedule_store

    runtime = Runtime.from_settings(no_worker_settings)
    schedule_store(runtime).save(parse_schedule({"name": "piled", "every_s": 1, "plan": NOOP}))
    now = time.time()
    ticks = [f"{now + i:.3f}" for i in range(6)]
    with ThreadPoolExecutor(len(ticks)) as pool:
        fires = list(
            pool.map(lambda tick: fire_schedule(runtime, RecordingBroker(), "piled", tick), ticks)
        )
    assert sorted(fire.outcome for fire in fires) == ["skipped"] * 5 + ["started"]
