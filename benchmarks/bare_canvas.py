"""Bare Celery's canvas for a diamond, ``chain(a, group(b, c), d)``, with dagwright's
Celery configuration plus the result backend a chord needs.

Started as a worker by ``many_runs.py`` (``celery -A benchmarks.bare_canvas worker``);
``BENCH_BROKER_URL`` and ``BENCH_STATE_URL`` name the servers (the state database holds
the chords' results and the count of finished diamonds).
"""

from __future__ import annotations

import os

import redis
from celery import Celery, chain, group

from dagwright.app import celery_config
from dagwright.settings import Settings

CANVAS_QUEUE = "bare.canvas"
DONE_KEY = "bench:canvas:done"
STATE_URL = os.environ.get("BENCH_STATE_URL", "redis://localhost/1")

app = Celery("bare_canvas", set_as_current=False)
app.conf.update(
    celery_config(Settings(), os.environ.get("BENCH_BROKER_URL", "redis://localhost/0"))
)
# A chord's header tasks keep their results until its body runs: the one place Celery
# needs a result backend (dagwright keeps node outputs in the run state instead).
app.conf.update(result_backend=STATE_URL, task_ignore_result=False, result_expires=600)
_state = redis.Redis.from_url(STATE_URL)


@app.task(name="bare.canvas.step")
def step(*_: object) -> None:
    """A no-op node of the diamond (a, b or c)."""


@app.task(name="bare.canvas.join")
def join(*_: object) -> None:
    """The diamond's last node: counts a finished diamond."""
    _state.incr(DONE_KEY)


def diamond() -> chain:
    """``a``, then ``b`` and ``c`` side by side, then ``d``: what a Celery user writes."""
    options = {"queue": CANVAS_QUEUE}
    return chain(
        step.si().set(**options),
        group(step.si().set(**options), step.si().set(**options)),
        join.s().set(**options),
    )
