"""The Message Batches API of the fake: create, retrieve, results, cancel.

``POST /v1/messages/batches`` takes ``{"requests": [{"custom_id", "params"}, ...]}``. As the
real API does, the batch's shape is checked at once (1 to 100,000 requests, each
``custom_id`` of 1-64 letters, digits, ``_`` or ``-`` and unique in the batch, ``params`` an
object: a 400 otherwise), while each request's ``params`` are checked when the batch
processes it: a request the Messages API would refuse is an ``errored`` result, not a 400
of the batch. The fake decides every request's answer at creation (through the same
playback, rules and script as ``POST /v1/messages``, logged with ``endpoint: batch``) and
holds the answers back until the batch has been processing for ``processing_s``: a poll
before then sees ``in_progress``, as a real batch keeps a caller waiting. A batch can be
cancelled (its undelivered requests ``canceled``) or expired by the test
(``expire_all``: ``expired`` results, as the API's 24-hour limit plays).

Results come as JSON Lines (``application/x-jsonl``) from the batch's ``results_url``,
absolute, as the SDK follows it; asking for them before the batch ended is a 400.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from dagwright.testing.fake_anthropic_answers import Answer, IdMint, error_body, json_answer

MAX_BATCH_REQUESTS = 100_000
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
EXPIRES_AFTER = timedelta(hours=24)

# Plays one request's params as ``POST /v1/messages`` would: its result object
# (``{"type": "succeeded", "message": ...}`` or ``{"type": "errored", "error": ...}``).
PlayRequest = Callable[[dict[str, Any], Mapping[str, str]], dict[str, Any]]


@dataclass
class _Batch:
    id: str
    created: datetime
    ready_at: float
    """``time.monotonic()`` from which the results are delivered."""
    results: dict[str, dict[str, Any]]
    """Each request's result, by custom_id, decided at creation."""
    ended: datetime | None = None
    cancel_initiated: datetime | None = None
    overridden: dict[str, str] = field(default_factory=dict)
    """custom_id -> ``canceled`` or ``expired``: requests that were never delivered."""

    def is_over(self) -> bool:
        return self.ended is not None or time.monotonic() >= self.ready_at

    def end_if_due(self) -> None:
        if self.ended is None and time.monotonic() >= self.ready_at:
            self.ended = datetime.now(UTC)

    def result_of(self, custom_id: str) -> dict[str, Any]:
        if custom_id in self.overridden:
            return {"type": self.overridden[custom_id]}
        return self.results[custom_id]

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        for custom_id in self.results:
            kind = self.result_of(custom_id)["type"] if self.is_over() else "processing"
            counts[kind] += 1
        return counts


class MessageBatches:
    """The batches the fake holds (not thread-safe on its own: one lock guards it)."""

    def __init__(self, processing_s: float = 0.0) -> None:
        self.processing_s = processing_s
        self._batches: dict[str, _Batch] = {}
        self._ids = IdMint()
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Forget every batch; batches answer at once again."""
        with self._lock:
            self._batches.clear()
            self.processing_s = 0.0

    def create(
        self, raw_body: bytes, headers: Mapping[str, str], play: PlayRequest, base_url: str
    ) -> Answer:
        requests, problem = _requests_of(raw_body)
        if problem is not None:
            return _invalid(problem)
        results = {item["custom_id"]: play(item["params"], headers) for item in requests}
        with self._lock:
            batch = _Batch(
                id=self._ids.next("msgbatch"),
                created=datetime.now(UTC),
                ready_at=time.monotonic() + self.processing_s,
                results=results,
            )
            self._batches[batch.id] = batch
            return json_answer(200, _batch_object(batch, base_url))

    def retrieve(self, batch_id: str, base_url: str) -> Answer:
        with self._lock:
            batch = self._batches.get(batch_id)
            if batch is None:
                return _not_found(batch_id)
            batch.end_if_due()
            return json_answer(200, _batch_object(batch, base_url))

    def results(self, batch_id: str) -> Answer:
        with self._lock:
            batch = self._batches.get(batch_id)
            if batch is None:
                return _not_found(batch_id)
            batch.end_if_due()
            if batch.ended is None:
                return _invalid(f"batch {batch_id} is still processing: it has no results yet")
            lines = [
                json.dumps({"custom_id": custom_id, "result": batch.result_of(custom_id)})
                for custom_id in batch.results
            ]
        body = ("\n".join(lines) + "\n").encode()
        return Answer(200, body, {"content-type": "application/binary"})

    def cancel(self, batch_id: str, base_url: str) -> Answer:
        with self._lock:
            batch = self._batches.get(batch_id)
            if batch is None:
                return _not_found(batch_id)
            if not batch.is_over():
                batch.cancel_initiated = datetime.now(UTC)
                batch.overridden = dict.fromkeys(batch.results, "canceled")
                batch.ended = batch.cancel_initiated
            return json_answer(200, _batch_object(batch, base_url))

    def expire_all(self) -> int:
        """End every batch still processing with all its requests ``expired`` (the API's
        24-hour limit, played at once); how many batches that was."""
        with self._lock:
            processing = [batch for batch in self._batches.values() if not batch.is_over()]
            for batch in processing:
                batch.overridden = dict.fromkeys(batch.results, "expired")
                batch.ended = datetime.now(UTC)
            return len(processing)


def _requests_of(raw_body: bytes) -> tuple[list[dict[str, Any]], str | None]:
    """The batch's requests, or what is wrong with its shape (the API's synchronous 400)."""
    try:
        body = json.loads(raw_body)
    except (ValueError, UnicodeDecodeError):
        return [], "body must be a JSON object"
    requests = body.get("requests") if isinstance(body, dict) else None
    if not isinstance(requests, list) or not requests:
        return [], "requests: Field required: a list of 1 to 100000 requests"
    if len(requests) > MAX_BATCH_REQUESTS:
        return [], f"requests: List should have at most {MAX_BATCH_REQUESTS} items"
    seen: set[str] = set()
    for index, item in enumerate(requests):
        problem = _request_problem(index, item, seen)
        if problem is not None:
            return [], problem
    return requests, None


def _request_problem(index: int, item: Any, seen: set[str]) -> str | None:
    if not isinstance(item, dict) or not isinstance(item.get("params"), dict):
        return f"requests.{index}.params: Input should be a valid dictionary"
    custom_id = item.get("custom_id")
    if not isinstance(custom_id, str) or not CUSTOM_ID.match(custom_id):
        return f"requests.{index}.custom_id: String should match pattern '{CUSTOM_ID.pattern}'"
    if custom_id in seen:
        return f"requests.{index}.custom_id: duplicate custom_id {custom_id!r} in the batch"
    seen.add(custom_id)
    return None


def _batch_object(batch: _Batch, base_url: str) -> dict[str, Any]:
    ended = batch.ended
    return {
        "id": batch.id,
        "type": "message_batch",
        "processing_status": "ended"
        if ended
        else ("canceling" if batch.cancel_initiated else "in_progress"),
        "request_counts": batch.counts(),
        "created_at": _iso(batch.created),
        "expires_at": _iso(batch.created + EXPIRES_AFTER),
        "ended_at": _iso(ended) if ended else None,
        "archived_at": None,
        "cancel_initiated_at": _iso(batch.cancel_initiated) if batch.cancel_initiated else None,
        "results_url": f"{base_url}/v1/messages/batches/{batch.id}/results" if ended else None,
    }


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _invalid(message: str) -> Answer:
    return json_answer(400, error_body("invalid_request_error", message))


def _not_found(batch_id: str) -> Answer:
    return json_answer(404, error_body("not_found_error", f"message batch {batch_id} not found"))


def batch_result(answer: Answer) -> dict[str, Any]:
    """A Messages answer as a batch request's result: the message, or its error."""
    payload = json.loads(answer.body)
    if answer.status == 200:
        return {"type": "succeeded", "message": payload}
    error = payload.get("error", {}) if isinstance(payload, dict) else {}
    return {"type": "errored", "error": {"type": "error", "error": error}}
