"""Rate limits' values: ``"5/s"``, ``"10/m"``, ``"100/h"``, how many node starts a rate
allows per period, over every worker (orchestrator/execution/rates.py enforces them).

Pure parsing, shared by the settings (``DAGWRIGHT_RATE_LIMITS``) and by
``@dagwright.function(rate_limit=...)``, so both refuse the same texts the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PERIODS_S = {"s": 1, "m": 60, "h": 3600}
MAX_COUNT = 10_000  # starts kept per rate's window (one zset member each)
RATE_PATTERN = re.compile(r"^\s*(\d{1,6})\s*/\s*([smh])\s*$")
SUBJECT_PREFIXES = ("function:", "type:")


@dataclass(frozen=True)
class Rate:
    """At most ``count`` starts in any ``period_s`` seconds."""

    count: int
    period_s: int

    @classmethod
    def parse(cls, text: str) -> Rate:
        """``"5/s"`` -> Rate(5, 1); ValueError, one line, for anything else."""
        match = RATE_PATTERN.match(text)
        if match is None:
            raise ValueError(f"a rate is N/s, N/m or N/h (e.g. 5/s), not {text[:40]!r}")
        count = int(match.group(1))
        if not 1 <= count <= MAX_COUNT:
            raise ValueError(f"a rate's count is 1 to {MAX_COUNT}, not {count}")
        return cls(count, PERIODS_S[match.group(2)])

    def __str__(self) -> str:
        unit = {seconds: unit for unit, seconds in PERIODS_S.items()}[self.period_s]
        return f"{self.count}/{unit}"


def checked_rates(rates: dict[str, str]) -> dict[str, str]:
    """``DAGWRIGHT_RATE_LIMITS`` checked: each subject ``function:<name>`` or
    ``type:<worker type>``, each rate one ``Rate.parse`` takes (ValueError otherwise)."""
    for subject, text in rates.items():
        if not subject.startswith(SUBJECT_PREFIXES) or subject in SUBJECT_PREFIXES:
            raise ValueError(
                f"rate limit {subject[:60]!r}: name function:<name> or type:<worker type>"
            )
        Rate.parse(text)
    return rates
