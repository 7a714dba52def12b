"""Schedules stored in Redis (``dw:schedules``), their fired ticks and their history."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import redis
import redis.lock

from dagwright.errors import UnknownScheduleError
from dagwright.keys import Keys
from dagwright.orchestrator.runtime import Runtime
from dagwright.schedules.definition import (
    HISTORY_MAX,
    TICK_TTL_S,
    Schedule,
)
from dagwright.shown_ids import shown_id

# A fire decides and starts a run in a few round trips; a lock older than this was left
# by a dead process. A tick that cannot have it in time is skipped, and says why.
FIRE_LOCK_TTL_S = 30.0
FIRE_LOCK_WAIT_S = 10.0


@dataclass(frozen=True)
class Fire:
    """One tick of a schedule and what it did."""

    tick: str
    fired_at: datetime
    outcome: str  # started, skipped
    run_id: str = ""
    reason: str = ""

    def to_json(self) -> dict[str, str]:
        return {
            "tick": self.tick,
            "fired_at": self.fired_at.isoformat(),
            "outcome": self.outcome,
            "run_id": self.run_id,
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, raw: str) -> Fire:
        data = json.loads(raw)
        return cls(**{**data, "fired_at": datetime.fromisoformat(data["fired_at"])})


class ScheduleStore:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    def save(self, schedule: Schedule) -> None:
        self.client.hset(self.keys.schedules, schedule.name, schedule.model_dump_json())

    def get(self, name: str) -> Schedule:
        raw = self.client.hget(self.keys.schedules, name)
        if raw is None:
            known = ", ".join(self.names()) or "none"
            raise UnknownScheduleError(
                f"no schedule {shown_id(name)!r}; the schedules are: {known}"
            )
        return Schedule.model_validate_json(raw)

    def names(self) -> list[str]:
        return sorted(self.client.hkeys(self.keys.schedules))

    def all(self) -> list[Schedule]:
        raw = self.client.hgetall(self.keys.schedules)
        return [Schedule.model_validate_json(raw[name]) for name in sorted(raw)]

    def delete(self, name: str) -> None:
        self.get(name)
        # Two Cluster slots: the history first, so a crash leaves the schedule (the
        # command is repeated), never another's history under a re-used name.
        self.client.delete(self.keys.schedule_history(name))
        self.client.hdel(self.keys.schedules, name)

    def firing(self, name: str) -> redis.lock.Lock:
        """The lock one fire of ``name`` holds while it decides and starts its run, so
        that two ticks fired at once (a worker that was down, a beat catching up) see each
        other's run. Bounded both ways: held at most FIRE_LOCK_TTL_S, waited for at most
        FIRE_LOCK_WAIT_S."""
        return self.client.lock(
            self.keys.schedule_firing(name),
            timeout=FIRE_LOCK_TTL_S,
            blocking_timeout=FIRE_LOCK_WAIT_S,
        )

    def claim_tick(self, name: str, tick: str) -> bool:
        """True for the first fire of this tick only."""
        return bool(self.client.set(self.keys.schedule_tick(name, tick), 1, nx=True, ex=TICK_TTL_S))

    def record(self, name: str, fire: Fire) -> None:
        pipe = self.client.pipeline()
        pipe.lpush(self.keys.schedule_history(name), json.dumps(fire.to_json()))
        pipe.ltrim(self.keys.schedule_history(name), 0, HISTORY_MAX - 1)
        pipe.execute()

    def history(self, name: str, limit: int = 20) -> list[Fire]:
        raws = self.client.lrange(self.keys.schedule_history(name), 0, max(limit, 1) - 1)
        return [Fire.from_json(raw) for raw in raws]

    def last_run(self, name: str) -> str | None:
        """The run the schedule started last, if any (among the kept history)."""
        for fire in self.history(name, HISTORY_MAX):
            if fire.run_id:
                return fire.run_id
        return None


def schedule_store(runtime: Runtime) -> ScheduleStore:
    return ScheduleStore(runtime.client, runtime.keys)
