"""The typed context a worker gets for one execution of one node."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from dagwright.settings import Settings


@dataclass
class NodeContext:
    """What a worker knows about the node it runs.

    ``cancelled`` turns true when the node must stop early: its run was cancelled, or its
    lease was lost to another worker (its result would be discarded anyway). Long-running
    workers check it between steps.
    """

    run_id: str
    node_id: str
    attempt: int
    fence: int
    settings: Settings
    inputs: dict[str, Any]
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def cancelled(self) -> bool:
        return self.stop.is_set()

    def sleep(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True if woken early because the node must stop."""
        return self.stop.wait(seconds)
