"""A dagwright function that opens a gate of ``celery_team_app``'s ``wait_for_gate``:
a dagwright node the team's task waits on."""

from __future__ import annotations

import dagwright
from tests.support.celery_team_app import gate_key, team_redis


@dagwright.function
def open_gate(tag: str) -> str:
    """Opens the gate ``tag`` (sets its key in the team's Redis)."""
    team_redis().set(gate_key(tag), "1", ex=600)
    return f"opened {tag}"
