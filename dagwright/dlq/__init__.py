"""The dead-letter queue: nodes that failed for good, with what a replay needs.

The store loads on first use (PEP 562): the entries are plain types, which the CLI reads
without paying for a Redis client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dagwright.dlq.entries import (
    Classification,
    DeadLetter,
    DeadLetterFilter,
    DeadLetterStats,
    DeadLetterStatus,
    classify,
)

if TYPE_CHECKING:
    from dagwright.dlq.store import DeadLetterStore


def __getattr__(name: str) -> Any:
    if name != "DeadLetterStore":
        raise AttributeError(f"module 'dagwright.dlq' has no attribute {name!r}")
    from dagwright.dlq.store import DeadLetterStore

    globals()[name] = DeadLetterStore  # looked up once
    return DeadLetterStore


__all__ = [
    "Classification",
    "DeadLetter",
    "DeadLetterFilter",
    "DeadLetterStats",
    "DeadLetterStatus",
    "DeadLetterStore",
    "classify",
]
