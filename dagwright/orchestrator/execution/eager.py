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

Batches (decision 124): a worker pulling a fan-out's quick nodes takes several in one
step, and records their successes together in the step that takes the next ones: one
round trip and one script for up to ``batch_max_nodes`` nodes, not one each. A batch is
sized by the pace of the node just run, so that it runs within ``batch_window_s``: a slow
node (an agent's) is taken alone and recorded at once. The nodes held, claimed or
succeeded and not yet recorded, keep their leases renewed by the lease keeper; a worker
lost whole runs them again elsewhere (none was recorded), as Celery does a message not
acked yet.

Chains run ahead (decision 128): a chain's node claimed in such a step comes with the
links after it (``Claim.ahead``: each the only dependent of the one before, depending on
it alone), and the worker runs them one after another, each before the success of the
one before is recorded, its input being that success's output; the step recording them
all claims the next node and its links. A link stays pending until then; the success
before it, held, keeps its lease renewed; a worker lost whole runs them again elsewhere,
as a batch's. A link still running when the successes held before it are due (or at its
timeout) is claimed meanwhile by the lease keeper's thread, and one that does not succeed
is claimed before its outcome is recorded (attempt.py ``promote``, ``claim_ahead``): the
successes before it are recorded in that step, and the link is then any claimed node.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from dagwright.orchestrator.runstate.machine import (
    AHEAD_FENCE,
    AheadLink,
    Claim,
    ReadyNode,
    Success,
)

# The least time a kept node has past its own deadline before the time limit of the
# message being served fires: dagwright's timeout (the lease keeper) must act first.
MIN_GRACE_S = 1.0
# The shortest pace a batch is sized by: a node faster than this (a no-op) is taken in
# batches of batch_max_nodes.
MIN_PACE_S = 0.0001


@dataclass(frozen=True)
class EagerRun:
    """A node this worker ran eagerly: what its own Celery task would have told Flower."""

    node: ReadyNode
    outcome: str
    started_at: float  # time.time()
    runtime_s: float


@dataclass(frozen=True)
class HeldNode:
    """A node this worker runs next: its claim if the step that readied it claimed it,
    and the event set if its lease is lost before it starts (a batch's: eager.py)."""

    node: ReadyNode
    claim: Claim | None = None
    lost: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class AheadNode:
    """A chain's link this worker runs after the success of ``parent``, before that one is
    recorded; ``head`` is the claim the link came with (its run's fields)."""

    run_id: str
    link: AheadLink
    parent: str
    head: Claim

    @property
    def node(self) -> ReadyNode:
        """The link as a ready node, under the fence of a success run ahead."""
        return ReadyNode(self.run_id, self.link.node.id, AHEAD_FENCE, self.link.dispatch)


@dataclass
class EagerSlot:
    """Room for the nodes this worker runs next, itself, instead of publishing them: one
    a success readied, or a batch of a fan-out's claimed in the step that recorded it.

    ``queues``: the queues this worker consumes (a node from another is never kept);
    ``deadline``: the ``time.monotonic()`` at which the message being served runs out
    of time (its soft time limit); ``window_s`` and ``max_batch``: how long successes may
    wait to be recorded together, and how many nodes at most (``batch_window_s``,
    ``batch_max_nodes``).
    """

    queues: frozenset[str]
    deadline: float
    window_s: float = 0.0
    max_batch: int = 1
    started: float = field(default_factory=time.monotonic)  # when the message began
    held: deque[HeldNode] = field(default_factory=deque, init=False)
    # The chain after the last node held, run once the held ones are (keep_claimed).
    ahead: deque[AheadNode] = field(default_factory=deque, init=False)
    # The run whose chain had a link this worker may not run ahead: no links are asked
    # for it again while this message is served (their lookups would be for nothing).
    links_refused: str = field(default="", init=False)
    ran: list[EagerRun] = field(default_factory=list, init=False)
    # Successes not recorded yet (a batch's), of ``pending_run``, the first at ``pending_since``.
    pending: list[Success] = field(default_factory=list, init=False)
    pending_run: str = field(default="", init=False)
    pending_since: float = field(default=0.0, init=False)
    pace_s: float | None = field(default=None, init=False)  # the last success's duration

    @property
    def kept(self) -> ReadyNode | None:
        """The node this worker runs next, if any."""
        return self.held[0].node if self.held else None

    def keep_one(self, ready: list[ReadyNode]) -> list[ReadyNode]:
        """Keep the first node this worker may run itself (if the slot is free); return
        the others, whose messages must be published."""
        if self.held:
            return ready
        for index, node in enumerate(ready):
            if self.admits(node):
                self.held.append(HeldNode(node))
                return ready[:index] + ready[index + 1 :]
        return ready

    def keep_claimed(
        self,
        claimed: Sequence[tuple[ReadyNode, Claim]],
        runs_ahead: Callable[[str, AheadLink, Claim], bool],
    ) -> list[HeldNode]:
        """Keep ``claimed``, claimed for this worker in the step that readied them, to run
        in this order, and the chain after the last of them, up to its first link that
        ``runs_ahead`` refuses; returns those claimed as held."""
        held = [HeldNode(node, claim) for node, claim in claimed]
        self.held.extend(held)
        if claimed:
            last, head = claimed[-1]
            parent = last.node_id
            for link in head.ahead:
                if not runs_ahead(last.run_id, link, head):
                    self.links_refused = last.run_id
                    break
                self.ahead.append(AheadNode(last.run_id, link, parent, head))
                parent = link.node.id
        return held

    def admits(self, node: ReadyNode) -> bool:
        return (
            node.dispatch.queue in self.queues
            and node.dispatch.time_limit_s <= self.max_time_limit_s()
        )

    def max_time_limit_s(self) -> float:
        """The longest time limit a node kept now may have (the last of a batch starts
        up to ``window_s`` later)."""
        return self.deadline - time.monotonic() - MIN_GRACE_S - self.window_s

    def take(self) -> HeldNode | None:
        """The next node held, if any (it leaves the slot)."""
        return self.held.popleft() if self.held else None

    def take_ahead(self) -> AheadNode | None:
        """The next link to run ahead, if the success before it is the last one held (it
        leaves the slot); else None, and the chain is dropped: that success was recorded,
        which readied the link, or it did not succeed."""
        if self.held or not self.ahead:
            return None
        link = self.ahead.popleft()
        last = self.pending[-1] if self.pending and self.pending_run == link.run_id else None
        if last is None or last.node_id != link.parent:
            self.drop_ahead()
            return None
        return link

    def asks_links(self, run_id: str) -> bool:
        """Whether the step claiming this worker's next nodes of ``run_id`` offers a
        chain's links to run ahead (``RunOn.links``)."""
        return self.max_batch > 1 and self.links_refused != run_id

    def drop_ahead(self) -> None:
        """Run no link ahead any more (a success is recorded: the step readies what is next)."""
        self.ahead.clear()

    def runs_ahead_next(self, run_id: str, node_id: str) -> bool:
        """Whether a link after ``node_id`` is the next node this worker runs."""
        return (
            not self.held
            and bool(self.ahead)
            and self.ahead[0].run_id == run_id
            and self.ahead[0].parent == node_id
        )

    def record(self, node: ReadyNode, outcome: str, started_at: float, runtime_s: float) -> None:
        self.ran.append(EagerRun(node, outcome, started_at, runtime_s))

    def batch(self) -> int:
        """How many nodes to take in the next step: as many as run within ``window_s`` at
        the pace of the last success (one until a success was seen)."""
        if self.pace_s is None or self.max_batch <= 1:
            return 1
        fits = int(self.window_s / max(self.pace_s, MIN_PACE_S))
        return max(1, min(self.max_batch, fits))

    def holds_success(self, run_id: str, success: Success) -> bool:
        """Hold ``success`` to be recorded with the next ones if this worker runs another
        node of the same run's batch next and the first success held is younger than
        ``window_s``; False: it must be recorded now, with those held (``take_pending``).
        Its attempt's duration is the pace the next batch is sized by."""
        if success.duration is not None:
            self.pace_s = success.duration.seconds
        now = time.monotonic()
        claimed_next = bool(self.held) and self.held[0].claim is not None
        if claimed_next and self.held[0].node.run_id != run_id:
            return False
        if not claimed_next and not self.runs_ahead_next(run_id, success.node_id):
            return False
        late = now - self.pending_since > self.window_s
        if self.pending and (self.pending_run != run_id or late):
            return False
        if len(self.pending) + 1 >= self.max_batch:
            return False
        if not self.pending:
            self.pending_run, self.pending_since = run_id, now
        self.pending.append(success)
        return True

    def take_pending(self, run_id: str) -> list[Success]:
        """The successes held for ``run_id`` (the slot holds none after)."""
        if self.pending_run != run_id:
            return []
        pending, self.pending, self.pending_run = self.pending, [], ""
        return pending


def eager_slot(
    consumed: Collection[str] | None,
    soft_limit_s: float | None,
    *,
    window_s: float = 0.0,
    max_batch: int = 1,
) -> EagerSlot | None:
    """The slot for a message with ``soft_limit_s`` that started now, on a worker consuming
    ``consumed``; None (nothing is run eagerly) when either is unknown."""
    if not consumed or not soft_limit_s:
        return None
    return EagerSlot(frozenset(consumed), time.monotonic() + soft_limit_s, window_s, max_batch)
