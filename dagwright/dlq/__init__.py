"""The dead-letter queue: nodes that failed for good, with what a replay needs.

Replaying one moves its run on, so it is the orchestrator's:
``dagwright.orchestrator.control.dead_letter_replay`` (this package sits below it).

The store loads on first use (PEP 562): the entries are plain types, which the CLI reads
without paying for a Redis client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagwright.dlq.entries import (
    Classification,
    DeadLetter,
    DeadLetterFilter,
    DeadLetterStats,
    DeadLetterStatus,
    RawMessage,
    classify,
)
from dagwright.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from dagwright.dlq.store import DeadLetterStore


__getattr__, __dir__ = lazy_exports(__name__, globals(), {"DeadLetterStore": "dagwright.dlq.store"})


__all__ = [
    "Classification",
    "DeadLetter",
    "DeadLetterFilter",
    "DeadLetterStats",
    "DeadLetterStatus",
    "DeadLetterStore",
    "RawMessage",
    "classify",
]
