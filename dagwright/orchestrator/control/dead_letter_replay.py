"""Replaying dead letters: their nodes run again, their runs pick up where they stopped.

The state change is one step (lua/replay.lua): the node back to QUEUED under a new fence,
its blocked dependents back to PENDING, the run re-opened if it had ended, the entry
marked replayed. Only then is the node's message published; if that fails, the reconciler
publishes it (the run is in its active set).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dagwright.dlq import (
    Classification,
    DeadLetter,
    DeadLetterFilter,
    DeadLetterStatus,
    DeadLetterStore,
)
from dagwright.orchestrator.broker import Broker, dispatch
from dagwright.orchestrator.runstate.machine import ReplayRefused
from dagwright.orchestrator.runtime import Runtime


@dataclass(frozen=True)
class ReplayResult:
    """What became of one dead letter: ``replayed``, or ``reason`` why not."""

    entry_id: str
    run_id: str
    node_id: str
    replayed: bool
    reopened: bool = False  # its run had ended and runs again
    reason: str = ""
    warning: str = ""  # replayed, but likely to fail the same way

    def to_json(self) -> dict[str, str | bool]:
        return {
            "id": self.entry_id,
            "run_id": self.run_id,
            "node_id": self.node_id,
            "replayed": self.replayed,
            "reopened": self.reopened,
            "reason": self.reason,
            "warning": self.warning,
        }


def dead_letters(runtime: Runtime) -> DeadLetterStore:
    return DeadLetterStore(
        runtime.client, runtime.keys, retention_s=runtime.settings.retention.dlq_retention_s
    )


def replay(
    runtime: Runtime, broker: Broker, letter: DeadLetter, *, fresh: bool = False
) -> ReplayResult:
    """Replay one dead letter (``fresh``: drop its node's checkpoint, so an agent starts
    its conversation over instead of resuming it)."""
    if not letter.replayable:
        return ReplayResult(letter.id, "", "", False, reason=NOT_A_NODE.format(id=letter.id))
    outcome = runtime.machine.replay(
        letter.run_id, letter.node_id, letter.fence, entry_id=letter.id, fresh=fresh
    )
    if isinstance(outcome, ReplayRefused):
        return ReplayResult(letter.id, letter.run_id, letter.node_id, False, reason=outcome.reason)
    dispatch(broker, runtime.machine, outcome.ready)
    warning = SAME_BUDGET if letter.classification == Classification.BUDGET else ""
    return ReplayResult(
        letter.id, letter.run_id, letter.node_id, True, reopened=outcome.reopened, warning=warning
    )


NOT_A_NODE = "a malformed message, not a node: nothing to run (`dagwright dlq purge {id}` drops it)"

# A run's budget and a node's are fixed when the run is submitted; only an agent type's
# token_budget can have changed since (a redeployed worker).
SAME_BUDGET = (
    "its budget is unchanged, so it will likely stop again before its next LLM call "
    "(spending nothing): to spend more, submit the run again with a larger budget"
)


def replay_matching(
    runtime: Runtime, broker: Broker, where: DeadLetterFilter, *, fresh: bool = False
) -> list[ReplayResult]:
    """Replay every pending dead letter ``where`` matches, oldest first (so that when a
    node failed twice, the older letter is refused as superseded, the newer replayed).
    Malformed messages are left out unless asked for by class: a replay of "everything"
    after a fix must not fail on messages that were never nodes."""
    pending = where.model_copy(update={"status": DeadLetterStatus.PENDING})
    letters: Iterable[DeadLetter] = reversed(list(dead_letters(runtime).scan(pending)))
    asked_for_malformed = where.classification == Classification.MALFORMED
    return [
        replay(runtime, broker, letter, fresh=fresh)
        for letter in letters
        if letter.replayable or asked_for_malformed
    ]
