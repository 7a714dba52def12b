"""Eager continuation: the worker that readied a node runs it itself, when it may.

A node's success often readies the next node of a chain, or the join of a fan-out, and
that node is usually of a type the same worker serves. Publishing its message only for
this worker (or its sibling) to take it back costs a publish, a delivery, an ack and a
claim. Instead the worker keeps one such node and runs it right after, still through a
claim with the node's fence, its concurrency limits, lease and timeout: only the message
is skipped (Temporal does the same with its eager activity dispatch).

When no other run's message waits for the worker's turn (fairness.py), the step that
records the success also claims the node kept (complete.lua, ``RunOn``): one round trip and
one script a node instead of two. Otherwise the worker claims it itself, as it would a
message's node.

Safe by construction: a kept node not yet claimed stays in the run's outbox until its
claim, so if this worker dies in between, the reconciler publishes it like any unconfirmed
message; one claimed with the success has a lease, as any running node. What is
given up is only the message's own time limit, which is why a node is kept only while
the message this worker is serving still has that node's whole timeout left (and a grace):
after a few seconds of eager work the worker publishes again, and other queued work gets
its turn.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, field

from dagwright.orchestrator.runstate.machine import Claim, ReadyNode

# The least time a kept node has past its own deadline before the time limit of the
# message being served fires: dagwright's timeout (the lease keeper) must act first.
MIN_GRACE_S = 1.0


@dataclass(frozen=True)
class EagerRun:
    """A node this worker ran eagerly: what its own Celery task would have told Flower."""

    node: ReadyNode
    outcome: str
    started_at: float  # time.time()
    runtime_s: float


@dataclass
class EagerSlot:
    """Room for the one node this worker runs next, itself, instead of publishing it.

    ``queues``: the queues this worker consumes (a node from another is never kept);
    ``deadline``: the ``time.monotonic()`` at which the message being served runs out
    of time (its soft time limit).
    """

    queues: frozenset[str]
    deadline: float
    started: float = field(default_factory=time.monotonic)  # when the message began
    kept: ReadyNode | None = field(default=None, init=False)
    kept_claim: Claim | None = field(default=None, init=False)  # made with the success
    ran: list[EagerRun] = field(default_factory=list, init=False)

    def keep_one(self, ready: list[ReadyNode]) -> list[ReadyNode]:
        """Keep the first node this worker may run itself (if the slot is free); return
        the others, whose messages must be published."""
        if self.kept is not None:
            return ready
        for index, node in enumerate(ready):
            if self.admits(node):
                self.kept = node
                return ready[:index] + ready[index + 1 :]
        return ready

    def keep_claimed(self, node: ReadyNode, claim: Claim) -> None:
        """Keep ``node``, claimed for this worker in the step that readied it."""
        self.kept, self.kept_claim = node, claim

    def admits(self, node: ReadyNode) -> bool:
        return (
            node.dispatch.queue in self.queues
            and node.dispatch.time_limit_s <= self.max_time_limit_s()
        )

    def max_time_limit_s(self) -> float:
        """The longest time limit a node kept now may have."""
        return self.deadline - time.monotonic() - MIN_GRACE_S

    def take(self) -> tuple[ReadyNode, Claim | None] | None:
        """The kept node and its claim if it was claimed with the success (the slot is
        free again)."""
        kept, claim = self.kept, self.kept_claim
        self.kept = self.kept_claim = None
        return None if kept is None else (kept, claim)

    def record(self, node: ReadyNode, outcome: str, started_at: float, runtime_s: float) -> None:
        self.ran.append(EagerRun(node, outcome, started_at, runtime_s))


def eager_slot(consumed: Collection[str] | None, soft_limit_s: float | None) -> EagerSlot | None:
    """The slot for a message with ``soft_limit_s`` that started now, on a worker consuming
    ``consumed``; None (nothing is run eagerly) when either is unknown."""
    if not consumed or not soft_limit_s:
        return None
    return EagerSlot(frozenset(consumed), time.monotonic() + soft_limit_s)
