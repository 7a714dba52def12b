"""A Celery team's own app, with a result backend, as ``celery_task`` nodes use it
(``DAGWRIGHT_CELERY_APP=tests.support.celery_team_app:app``): its own queue ``team``,
JSON only, its tasks' results in its backend. The broker and backend URL come from the
environment (``TEAM_APP_BROKER_URL``), as a deployment would set them.

Its tasks count each run of their body in Redis (``body_runs_key``), so tests can tell a
task that ran from one that was revoked before it started, and one that ran twice.
``wait_for_gate`` blocks until a key (the "gate") exists: another node opens it.
"""

from __future__ import annotations

import os
import time
from functools import cache

import redis
from celery import Celery

BROKER_URL = os.environ.get("TEAM_APP_BROKER_URL", "redis://localhost:6379/0")

app = Celery("team_app")
app.conf.update(
    broker_url=BROKER_URL,
    result_backend=BROKER_URL,
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    task_default_queue="team",
    task_track_started=True,
    worker_prefetch_multiplier=1,
    # A killed worker's unacknowledged task comes back within seconds (acks_late tasks).
    broker_transport_options={
        "visibility_timeout": 4,
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
    },
)


@cache
def team_redis() -> redis.Redis:
    return redis.Redis.from_url(BROKER_URL, decode_responses=True)


def body_runs_key(name: str) -> str:
    """Counter of the runs of the body of the task called with ``tag=name``."""
    return f"team-test:body-runs:{name}"


def gate_key(name: str) -> str:
    return f"team-test:gate:{name}"


@app.task(name="team_app.fetch_prices")
def fetch_prices(ticker: str, days: int = 3) -> dict[str, object]:
    """The team's prices for ``ticker``, one a day."""
    return {"ticker": ticker, "prices": [100 + day for day in range(days)]}


@app.task(name="team_app.wait_for_gate", acks_late=True, reject_on_worker_lost=True)
def wait_for_gate(tag: str, timeout_s: float = 60.0) -> dict[str, object]:
    """Counts its run, then blocks until the gate ``tag`` is opened (a key appears)."""
    team_redis().incr(body_runs_key(tag))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if team_redis().exists(gate_key(tag)):
            return {"tag": tag, "gate": "opened"}
        time.sleep(0.05)
    raise TimeoutError(f"gate {tag} was never opened")


@app.task(
    name="team_app.no_prices",
    autoretry_for=(LookupError,),
    max_retries=1,
    default_retry_delay=0,
)
def no_prices(ticker: str) -> None:
    """Fails (after one retry of its own): the team's data has no such ticker."""
    team_redis().incr(body_runs_key(f"no_prices:{ticker}"))
    raise LookupError(f"no prices for {ticker}")
