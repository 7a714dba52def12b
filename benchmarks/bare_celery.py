"""Bare Celery doing what dagwright does, with dagwright's Celery configuration.

Started as a worker by ``overhead.py`` (``celery -A benchmarks.bare_celery worker``);
``BENCH_BROKER_URL`` and ``BENCH_STATE_URL`` name the servers.
"""

from __future__ import annotations

import os

import redis
from celery import Celery

from dagwright.app import celery_config
from dagwright.settings import Settings

BARE_QUEUE = "bare"
DONE_KEY = "bench:done"

app = Celery("bare", set_as_current=False)
app.conf.update(
    celery_config(Settings(), os.environ.get("BENCH_BROKER_URL", "redis://localhost/0"))
)
# Canvas (chord) needs a result backend; the bare tasks ignore their results.
app.conf.result_backend = os.environ.get("BENCH_STATE_URL", "redis://localhost/1")
_state = redis.Redis.from_url(os.environ.get("BENCH_STATE_URL", "redis://localhost/1"))


@app.task(name="bare.noop", ignore_result=True)
def noop() -> None:
    """One no-op node of a group: counts itself, as a join would."""
    _state.incr(DONE_KEY)


@app.task(name="bare.chain_link", bind=True, ignore_result=True)
def chain_link(self: object, remaining: int) -> None:
    """One link of a chain: enqueue the next link, or mark the chain done."""
    if remaining <= 1:
        _state.set(DONE_KEY, 1)
        return
    app.send_task("bare.chain_link", args=[remaining - 1], queue=BARE_QUEUE)


@app.task(name="canvas.noop")
def canvas_noop() -> None:
    """One no-op node of a canvas (chord header or chain link): its result is stored, as
    a chord needs to join on it."""


@app.task(name="canvas.done", ignore_result=True)
def canvas_done(*_: object) -> None:
    """The chord's body or the chain's last link: marks the canvas done."""
    _state.set(DONE_KEY, 1)
