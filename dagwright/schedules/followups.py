"""Follow-up runs: a scheduled run's writer proposes a goal, started with the schedule's options."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime

from dagwright.errors import ScheduleError
from dagwright.orchestrator.broker import Broker
from dagwright.orchestrator.control.submission import start_run
from dagwright.orchestrator.runstate.creation import DEPTH_FIELD, SCHEDULE_FIELD
from dagwright.orchestrator.runtime import Runtime
from dagwright.redis_scripts import load_script, named_reply
from dagwright.schedules.store import Fire, schedule_store


def followup_starter(runtime: Runtime, broker: Broker) -> Callable[[str, str, str], str]:
    """What a worker's node services start follow-up runs with: ``propose_followup``
    bound to this process's runtime and broker."""
    return lambda run_id, goal, reason: propose_followup(runtime, broker, run_id, goal, reason)


def propose_followup(runtime: Runtime, broker: Broker, run_id: str, goal: str, reason: str) -> str:
    """Start ``goal`` as a follow-up run of ``run_id`` if its schedule allows one more;
    the same goal proposed again (a retried node) is the same follow-up. Returns what
    happened, for the model; ScheduleError saying why not."""
    fields = runtime.client.hmget(
        runtime.keys.run_key(run_id, "run"), [SCHEDULE_FIELD, DEPTH_FIELD]
    )
    name, depth = fields[0], int(fields[1] or 0)
    if not name:
        raise ScheduleError("follow-ups are for runs a schedule started; this run has none")
    store = schedule_store(runtime)
    schedule = store.get(name)
    if schedule.max_followups == 0:
        raise ScheduleError(f"schedule {name!r} allows no follow-up runs")
    if depth >= schedule.followup_depth:
        raise ScheduleError(
            f"this run is a follow-up {depth} deep; schedule {name!r} allows "
            f"{schedule.followup_depth}"
        )
    key = runtime.keys.run_followups(run_id)
    digest = hashlib.sha256(goal.strip().encode()).hexdigest()[:32]
    reserve = load_script(runtime.client, "dagwright.schedules", "followup_reserve")
    answer = named_reply(
        reserve(
            keys=[key],
            args=[digest, schedule.max_followups, runtime.settings.retention.retention_s],
        )
    )
    verdict, existing = answer["verdict"], answer["existing"]
    if verdict == "duplicate":
        return f"this follow-up was queued already: run {existing or '(starting)'}"
    if verdict == "full":
        raise ScheduleError(f"this run queued its {schedule.max_followups} follow-up(s) already")
    try:
        followup = start_run(
            runtime,
            broker,
            schedule.followup_request(goal),
            extra={SCHEDULE_FIELD: name, DEPTH_FIELD: depth + 1},
        )
    except Exception:
        runtime.client.hdel(key, digest)  # not started: it may be proposed again
        raise
    runtime.client.hset(key, digest, followup)
    fire = Fire(
        f"followup-of-{run_id}",
        datetime.now(UTC),
        "started",
        run_id=followup,
        reason=f"follow-up of {run_id}: {reason}".rstrip(": "),
    )
    store.record(name, fire)
    return f"queued follow-up run {followup}"
