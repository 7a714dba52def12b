"""Which memory namespace a node's calls use.

In order: the namespace the run names (its plan's ``memory:``, the submit's ``memory``
option, its schedule's ``memory``: the run hash's ``MEMORY_FIELD``), the one its agent
type names (``settings.memory.agent_memory[<type>].namespace``), else the run's schedule's
(``schedule:<name>``: what every run of a schedule shares), else the run's own
(``run:<id>``: its nodes share it, and it is forgotten after ``memory_retention_s``).
Named namespaces match ``settings.MEMORY_NAMESPACE_PATTERN`` (no ``:``), so a name never
takes a derived one.
"""

from __future__ import annotations

import re

from dagwright.errors import InputError
from dagwright.settings import MEMORY_NAMESPACE_PATTERN

MEMORY_FIELD = "memory"  # run hash: the namespace the run names
SCHEDULE_PREFIX = "schedule:"
RUN_PREFIX = "run:"
DERIVED_PATTERN = r"^(schedule:[a-z0-9][a-z0-9_.-]{0,62}|run:[A-Za-z0-9_.-]{1,80})$"


def namespace_of(
    named: str | None, type_namespace: str | None, schedule: str | None, run_id: str
) -> str:
    """The namespace of a node's memory calls (see the module's docstring)."""
    if named:
        return named
    if type_namespace:
        return type_namespace
    if schedule:
        return SCHEDULE_PREFIX + schedule
    return RUN_PREFIX + run_id


def checked_name(name: str, *, derived: bool = True) -> str:
    """``name`` if it names a namespace (``derived``: ``schedule:``/``run:`` ones too);
    InputError (one line) otherwise."""
    if re.fullmatch(MEMORY_NAMESPACE_PATTERN, name):
        return name
    if derived and re.fullmatch(DERIVED_PATTERN, name):
        return name
    raise InputError(
        f"{name!r} is no memory namespace: a name is lowercase letters, digits, '_', '.', "
        "'-' (up to 63), or schedule:<name> / run:<id>"
    )
