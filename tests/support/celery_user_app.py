"""A Celery user's own app, as they wrote it before dagwright: the tests never change it.

Its config is its own (its broker, JSON, its default queue ``user``); only the broker URL
comes from the environment, as a deployment would set it. ``tests/support/celery_nodes.py``
puts its tasks into plans, one line each.
"""

from __future__ import annotations

import os

from celery import Celery

app = Celery("user_app")
app.conf.update(
    broker_url=os.environ.get("USER_APP_BROKER_URL", "redis://localhost:6379/0"),
    task_serializer="json",
    accept_content=["json"],
    task_default_queue="user",
)


@app.task
def add(x: int, y: int) -> int:
    """Adds two numbers."""
    return x + y


@app.task(bind=True, name="user_app.scale")
def scale(self: object, values: list[int], factor: int = 2) -> list[int]:
    """Multiplies each value by a factor (a bound task: ``self`` is the task)."""
    return [value * factor for value in values]
