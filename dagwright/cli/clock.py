"""Times as the CLI prints them for people: to the second, with the zone named.

``2026-11-30 09:00:00 CET``, not ``2026-11-30T08:00:00.123456+00:00``: the microseconds
and the offset of an ISO time are what a script wants (``--json`` keeps them), not what a
person reads. A schedule's times show in its own zone (the zone its cron fields are read
in) unless ``--tz`` asks for another.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import typer

from dagwright.errors import InputError

TimeZoneOption = Annotated[
    str | None,
    typer.Option(
        "--tz",
        metavar="ZONE",
        help="Show times in this time zone (IANA name, e.g. Europe/Paris).",
        show_default=False,
    ),
]


def zone_named(name: str) -> tzinfo:
    """The IANA zone ``name`` (``UTC``, ``Europe/Paris``); an InputError if there is none."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as unknown:
        raise InputError(
            f"unknown time zone {name!r}: use an IANA name such as Europe/Paris"
        ) from unknown


def clock_time(value: datetime | None, zone: tzinfo = UTC) -> str:
    """``2026-11-30 09:00:00 CET``: ``value`` in ``zone``, to the second; ``-`` for None."""
    if value is None:
        return "-"
    shown = value.astimezone(zone)
    return f"{shown:%Y-%m-%d %H:%M:%S} {shown.tzname() or f'{shown:%z}'}"
