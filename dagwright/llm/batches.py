"""Half-price LLM calls through the Message Batches API, for runs nobody waits on.

A run, schedule or agent type may ask for it (``llm_batch``): each of its agents' calls is
then sent as a Message Batch of one request instead of a streamed ``messages.create``, at
half the price of every token (``BATCH_PRICE_FACTOR``). The API answers a batch within 24
hours, most within one; so the node does not hold its worker while it waits. The loop
submits the call and checkpoints the ``PendingBatch`` (a redelivered node polls the same
batch, never submits the call twice), then polls it; while it is processing, the node is
parked (``LLMBatchPendingError``: RETRY_WAIT, "waiting on batch …", no attempt spent)
and polled again after ``llm_batch_poll_s``. A batch that outlives
``llm_batch_max_wait_s`` is cancelled and the node dead-lettered (``BatchWaitExpiredError``).

One request per batch, on purpose: the discount does not depend on a batch's size, and a
batch per call keeps each node's call its own (no node waits for another's), with no
process gathering calls across nodes that could die holding them.
"""

from __future__ import annotations

import hashlib
import time
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from dagwright.llm.protocol import LLMRequest, LLMResponse


class PendingBatch(BaseModel):
    """A call sent in a Message Batch and not answered yet (kept in the checkpoint)."""

    model_config = ConfigDict(frozen=True)

    id: str
    """The batch's id (``msgbatch_…``)."""
    custom_id: str
    """The request's id in the batch."""
    submitted_at: float
    """When it was sent (``time.time()``)."""


class MessageBatches(Protocol):
    """What the agent loop needs of the Message Batches API."""

    def submit(self, request: LLMRequest, custom_id: str) -> PendingBatch:
        """Send ``request`` as a batch of one; LLM errors as ``complete`` raises them."""
        ...

    def answer(self, pending: PendingBatch, request: LLMRequest) -> LLMResponse | None:
        """The batch's answer to ``request`` (priced at the batch rate); None while it is
        processing. An errored, expired or cancelled request raises the LLM error it
        amounts to (retryable or not)."""
        ...

    def cancel(self, pending: PendingBatch) -> None:
        """Cancel the batch (best effort: one that already ended stays as it is)."""
        ...


def custom_id_of(run_id: str, node_id: str, turn: int) -> str:
    """The request's id in its batch: unique per run, node and turn, within the API's 64
    characters of ``[a-zA-Z0-9_-]`` whatever the ids' lengths."""
    digest = hashlib.sha256(f"{run_id}/{node_id}".encode()).hexdigest()[:40]
    return f"t{turn}-{digest}"


def submitted_now(batch_id: str, custom_id: str) -> PendingBatch:
    return PendingBatch(id=batch_id, custom_id=custom_id, submitted_at=time.time())
