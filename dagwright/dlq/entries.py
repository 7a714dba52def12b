"""A dead letter: a node that failed for good, with everything needed to replay it; or a
broker message a worker could not read, with what is safe to keep of it (never its body)."""

from __future__ import annotations

import enum
import json
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from dagwright.errors import (
    ApprovalRejectedError,
    BatchWaitExpiredError,
    BudgetExceededError,
    NodeTimeoutError,
    PoisonMessageError,
    ToolPolicyError,
)
from dagwright.models import from_ms


class Classification(enum.StrEnum):
    """Why the node failed for good, which says what fixes it before a replay."""

    TRANSIENT = "transient"  # kept failing through its retries: replay once it is back
    PERMANENT = "permanent"  # retrying could not help: fix the input, the code or the plan
    BUDGET = "budget"  # the token budget ran out: raise it
    POLICY = "policy"  # the tool policy or a person refused what the node needed
    POISON = "poison"  # it killed its worker on every delivery: fix the code
    TIMEOUT = "timeout"  # it ran past its timeout_s: raise it, or make the work smaller
    MALFORMED = "malformed"  # a message no dagwright client sent: find who writes the queue


class DeadLetterStatus(enum.StrEnum):
    PENDING = "pending"
    REPLAYED = "replayed"
    PURGED = "purged"


def classify(exc: BaseException, *, retryable: bool) -> Classification:
    """The class of a final failure; ``retryable``: the node's policy would have retried
    it had attempts been left."""
    if isinstance(exc, PoisonMessageError):
        return Classification.POISON
    if isinstance(exc, BudgetExceededError):
        return Classification.BUDGET
    if isinstance(exc, ToolPolicyError | ApprovalRejectedError):
        return Classification.POLICY
    if isinstance(exc, NodeTimeoutError):
        return Classification.TIMEOUT
    if isinstance(exc, BatchWaitExpiredError):  # a slow API, not a bad node: replay it
        return Classification.TRANSIENT
    return Classification.TRANSIENT if retryable else Classification.PERMANENT


class RawMessage(BaseModel):
    """What a malformed message's dead letter keeps of it: where it came from and what it
    claimed to be, never its body (it may hold anything, secrets included)."""

    model_config = ConfigDict(frozen=True)

    queue: str
    """The queue it was delivered on ('' when the transport could not tell)."""
    content_type: str
    content_encoding: str
    body_bytes: int
    """The raw body's size (-1 when the transport could not read the message at all)."""

    @classmethod
    def from_stream(cls, fields: dict[str, str]) -> RawMessage | None:
        if fields.get("classification") != Classification.MALFORMED:
            return None
        return cls(
            queue=fields.get("queue", ""),
            content_type=fields.get("content_type", ""),
            content_encoding=fields.get("content_encoding", ""),
            body_bytes=int(fields.get("body_bytes", -1)),
        )

    def to_stream(self) -> dict[str, str]:
        return {
            "queue": self.queue,
            "content_type": self.content_type,
            "content_encoding": self.content_encoding,
            "body_bytes": str(self.body_bytes),
        }


class DeadLetter(BaseModel):
    """One entry of the DLQ stream (a node's fields are written by lua/fail.lua, a
    malformed message's by ``DeadLetterStore.add_malformed``: no run, no node)."""

    model_config = ConfigDict(frozen=True)

    id: str
    run_id: str
    node_id: str
    fence: int
    worker_type: str
    spec: dict[str, Any]
    attempts: int
    classification: Classification
    error_class: str
    message: str
    traceback: str
    first_failure_at: datetime
    last_failure_at: datetime
    status: DeadLetterStatus = DeadLetterStatus.PENDING
    raw_message: RawMessage | None = None
    """Set for a malformed message: there is no node to replay, only a message to look into."""

    @property
    def replayable(self) -> bool:
        return self.raw_message is None

    @classmethod
    def from_stream(cls, entry_id: str, fields: dict[str, str], status: str | None) -> DeadLetter:
        return cls(
            id=entry_id,
            run_id=fields["run"],
            node_id=fields["node"],
            fence=int(fields["fence"]),
            worker_type=fields["worker_type"],
            spec=json.loads(fields["spec"]),
            attempts=int(fields["attempts"]),
            classification=Classification(fields["classification"]),
            error_class=fields["error_class"],
            message=fields["message"],
            traceback=fields.get("traceback", ""),
            first_failure_at=from_ms(fields["first_failure_ms"]),
            last_failure_at=from_ms(fields["last_failure_ms"]),
            status=DeadLetterStatus(status or DeadLetterStatus.PENDING),
            raw_message=RawMessage.from_stream(fields),
        )


class DeadLetterFilter(BaseModel):
    """Which dead letters a list, a replay or a purge applies to (unset: any)."""

    model_config = ConfigDict(frozen=True)

    run_id: str | None = None
    worker_type: str | None = None
    classification: Classification | None = None
    status: DeadLetterStatus | None = None

    def matches(self, fields: dict[str, str]) -> bool:
        return (
            (self.run_id is None or fields.get("run") == self.run_id)
            and (self.worker_type is None or fields.get("worker_type") == self.worker_type)
            and (self.classification is None or fields.get("classification") == self.classification)
        )


class DeadLetterStats(BaseModel):
    total: int
    by_status: dict[str, int]
    by_classification: dict[str, int]
    by_worker_type: dict[str, int]
    oldest_at: datetime | None
    newest_at: datetime | None
