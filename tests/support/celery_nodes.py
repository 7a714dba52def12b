"""Existing Celery tasks (``celery_user_app``) as dagwright functions: one line each, the
tasks unchanged (their ``.delay()`` still sends them to the user's app). Also a function
on a queue of its own, which reports the process that ran it."""

from __future__ import annotations

import os
import socket
from typing import Any

import dagwright
from tests.support.celery_user_app import add, scale

dagwright.function(add)
dagwright.function(scale)


@dagwright.function(queue="gpu")
def where_it_ran() -> dict[str, Any]:
    """Says which process ran it (a node of the ``gpu`` function queue)."""
    return {"pid": os.getpid(), "ppid": os.getppid(), "host": socket.gethostname()}


@dagwright.function
def total(inputs: dict[str, Any]) -> int:
    """Sums the lists and numbers its dependencies returned."""
    values = [value for output in inputs.values() for value in as_list(output)]
    return sum(values)


def as_list(output: Any) -> list[int]:
    return output if isinstance(output, list) else [output]
