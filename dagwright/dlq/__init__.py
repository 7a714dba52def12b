"""The dead-letter queue: nodes that failed for good, with what a replay needs."""

from dagwright.dlq.entries import (
    Classification,
    DeadLetter,
    DeadLetterFilter,
    DeadLetterStats,
    DeadLetterStatus,
    classify,
)
from dagwright.dlq.store import DeadLetterStore

__all__ = [
    "Classification",
    "DeadLetter",
    "DeadLetterFilter",
    "DeadLetterStats",
    "DeadLetterStatus",
    "DeadLetterStore",
    "classify",
]
