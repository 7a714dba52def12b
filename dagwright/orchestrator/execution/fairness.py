"""Priorities and fairness: which node a worker runs next.

The design is in docs/internals/priorities-and-fairness.md. Priorities order the broker's
messages (``app.broker_priority``), a run's pool (pool.lua) and so a worker's pulls. A node
that waited past ``priority_aging_s`` goes ahead of every priority (the reconciler publishes
it again at ``AGED_PRIORITY``): a low priority is late under a stream of higher ones, never
starved.

Fairness: a worker that runs a chain or pulls a fan-out eagerly (eager.py, pool.py) would
serve one run for as long as its message allows, while other runs' messages wait behind.
So before keeping a node, it looks at the next messages in line in the queues it
consumes (a few per priority, in one round trip, and the running count of their runs in
another, reused for ``WAITING_FRESH_S``). A message there of another run with fewer
nodes running than its own run has on other workers (a big run lends one of its
workers), or as many once this worker has served its message for ``FAIR_SLICE_S`` (a
time slice between equals): it gives its turn away. The node it would have kept goes out
as a message (behind those waiting, in its priority's list), so its run stays in line,
and the worker takes the broker's next message: the most urgent, then the oldest. A
small run's chain thus gets a worker from a big fan-out that has several, and keeps it.
Its own run's messages there change nothing (a worker handing its run's nodes back and
forth through the broker only adds messages). A message of a higher priority is taken
first, whoever published it.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable

from dagwright.models import AGED_PRIORITY
from dagwright.orchestrator.broker import Broker
from dagwright.orchestrator.execution.eager import EagerSlot
from dagwright.orchestrator.runstate.machine import Advance, ReadyNode

# How long a worker reuses its reading of the messages waiting in its queues: another
# run's message waits about one node more for its turn, and a chain pays one round trip
# per this much time of its edges, not one per edge.
WAITING_FRESH_S = 0.01
# How long a worker serves one message (its node and those it ran eagerly after it)
# before it gives way to a run holding as many workers as its own: the time slice
# between equals (one worker, two runs), long enough that they do not trade every node.
FAIR_SLICE_S = 0.1
# Messages looked at per list (queue and priority): enough to see past a run's own
# wake-up messages, few enough that a reading stays small.
WAITING_DEPTH = 4


def aged_node(node: ReadyNode) -> ReadyNode:
    """``node`` to publish again ahead of every priority (same fence)."""
    aged = dataclasses.replace(node.dispatch, priority=AGED_PRIORITY)
    return dataclasses.replace(node, dispatch=aged)


class Turn(enum.Enum):
    """What a worker does after a success, as to the node it would keep."""

    KEEP = "keep"  # runs it next, eagerly
    GIVE_WAY = "give_way"  # another run's message waits: hands the node over


class WaitingMessages:
    """The runs whose messages are next in line in a worker's queues, as the broker says
    (``""`` for a message that is not a node's), each with how many of its nodes run now
    (its run hash's ``running``; an unknown run as 0), reused for ``WAITING_FRESH_S``."""

    def __init__(
        self,
        broker: Broker,
        running: Callable[[list[str]], list[int]] = lambda runs: [0] * len(runs),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.broker = broker
        self.running = running
        self.clock = clock
        self._reading: tuple[frozenset[str], dict[str, int], float] = (
            frozenset(),
            {},
            float("-inf"),
        )

    def runs_in(self, queues: frozenset[str]) -> dict[str, int]:
        read_for, runs, read_at = self._reading
        now = self.clock()
        if read_for != queues or now - read_at > WAITING_FRESH_S:
            task_ids = self.broker.next_task_ids(sorted(queues), WAITING_DEPTH)
            found = sorted({run_of_task(task_id) for task_id in task_ids})
            runs = dict(zip(found, self.running(found), strict=True)) if found else {}
            self._reading = (queues, runs, now)
        return runs


def run_of_task(task_id: str) -> str:
    """The run of a node's task id (``run.node.fence``: keys.node_task_id), else ""."""
    run_id, node_id, fence = ["", "", *task_id.rsplit(".", 2)][-3:]
    return run_id if node_id and fence.isdigit() else ""


def next_turn(eager: EagerSlot, run_id: str, advance: Advance, waiting: WaitingMessages) -> Turn:
    """Whether the worker keeps the node it would run next, or hands it over (see the
    module's docstring). It gives way to a run whose message waits and which has fewer
    nodes running than its own run has on other workers; or as many, once it has served
    this message for ``FAIR_SLICE_S``. The broker is asked only when there is a node to
    keep."""
    if eager.kept is not None or not any(eager.admits(node) for node in advance.ready):
        return Turn.KEEP
    runs = waiting.runs_in(eager.queues)
    others = [held for run, held in runs.items() if run != run_id]
    sliced = time.monotonic() - eager.started >= FAIR_SLICE_S
    if any(held < advance.running or (sliced and held <= advance.running) for held in others):
        return Turn.GIVE_WAY
    return Turn.KEEP


def others_wait(eager: EagerSlot, run_id: str, waiting: WaitingMessages) -> bool:
    """Whether another run's message waits in this worker's queues. Only then may
    ``next_turn`` give way, so only then is the node to keep not claimed in the step that
    records the success (attempt.py record_success)."""
    return any(run != run_id for run in waiting.runs_in(eager.queues))


def handed_over(advance: Advance) -> list[ReadyNode]:
    """What a worker whose turn is over dispatches: every node its step readied or
    pulled, none kept, so that its run keeps a message in line (the run's other workers
    may be giving way at the same moment, and a pool nobody pulls waits for the
    reconciler)."""
    return advance.ready
