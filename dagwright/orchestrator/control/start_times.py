"""A run's delayed start (``not_before`` / ``countdown_s`` at submit): checked here, kept
in the run hash, honoured by lua/create_run.lua (roots due later wait in RETRY_WAIT in the
retry zset, which the reconciler releases when due).

``not_before`` is absolute (the submitter's clock names a moment); ``countdown_s`` is
relative and counted on the Redis server's clock in the script, so a submitter whose
clock is off still delays by exactly that much. Either is bounded by
``max_start_delay_s``: a typo of a year must not park a run for a year.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

from dagwright.errors import InputError

NOT_BEFORE_FIELD = "not_before_ms"  # epoch ms (absolute) the run's roots may start at
START_DELAY_FIELD = "start_delay_ms"  # ms after creation, on the server's clock


def start_fields(
    not_before: datetime | str | None, countdown_s: float | None, max_delay_s: float
) -> dict[str, str | int]:
    """The run hash's fields of a delayed start (none without one); InputError, one line,
    for both at once, an unreadable time, or a delay past ``max_delay_s``."""
    if not_before is not None and countdown_s is not None:
        raise InputError("give not_before or countdown_s, not both")
    if countdown_s is not None:
        return {START_DELAY_FIELD: round(checked_countdown(countdown_s, max_delay_s) * 1000)}
    if not_before is not None:
        moment = parsed_moment(not_before)
        ahead_s = moment.timestamp() - time.time()
        if ahead_s > max_delay_s:
            raise InputError(
                f"not_before {moment:%Y-%m-%d %H:%M:%S} UTC is {ahead_s:.0f} s away; the limit "
                f"is {max_delay_s:g} s (DAGWRIGHT_MAX_START_DELAY_S)"
            )
        return {NOT_BEFORE_FIELD: round(moment.timestamp() * 1000)}
    return {}


def checked_countdown(countdown_s: float, max_delay_s: float) -> float:
    if isinstance(countdown_s, bool) or not isinstance(countdown_s, int | float):
        raise InputError(f"countdown_s is a number of seconds, not {type(countdown_s).__name__}")
    if not (math.isfinite(countdown_s) and 0 <= countdown_s <= max_delay_s):
        raise InputError(
            f"countdown_s must be 0 to {max_delay_s:g} seconds "
            f"(DAGWRIGHT_MAX_START_DELAY_S), not {countdown_s}"
        )
    return float(countdown_s)


def parsed_moment(value: datetime | str) -> datetime:
    """``value`` as an aware datetime: an ISO 8601 text or a datetime; one without a zone
    is UTC (as Celery's ``eta`` with ``enable_utc``)."""
    if isinstance(value, str):
        text = value.strip()[:64]
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            raise InputError(
                f"not_before must be an ISO 8601 time (2026-11-29T05:00:00Z), not {text!r}"
            ) from None
    if not isinstance(value, datetime):
        raise InputError(f"not_before is a datetime or ISO 8601 text, not {type(value).__name__}")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
