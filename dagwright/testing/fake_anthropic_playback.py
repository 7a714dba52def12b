"""The decision half of the fake Anthropic API: which answer a request gets, and the log.

Kept apart from the HTTP half (:mod:`dagwright.testing.fake_anthropic`) so the playback
rules (validation, fault rolls, script entries in order) read without the server around them.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from dagwright.testing.fake_anthropic_script import (
    Answer,
    FaultInjection,
    IdMint,
    RequestFacts,
    Script,
    ScriptEntry,
    entry_answer,
    error_answer,
)

AnsweredBy = Literal["entry", "default", "fault", "no_match", "rejected"]
REDACTED_HEADERS = frozenset({"x-api-key", "authorization"})
REQUIRED_FIELDS: dict[str, type] = {"model": str, "max_tokens": int, "messages": list}


@dataclass(frozen=True)
class LoggedRequest:
    """One ``POST /v1/messages`` the server received, and how it answered."""

    at: float
    """When it arrived (``time.time()``)."""
    body: dict[str, Any]
    """The parsed JSON body (``{}`` if it was not a JSON object)."""
    body_sha256: str
    """Hex SHA-256 of the canonical JSON of ``body`` (sorted keys, no spaces)."""
    status: int
    """The HTTP status answered."""
    entry_index: int | None
    """Index of the script entry that answered; None for the default, faults and errors."""
    headers: dict[str, str]
    """Request headers, lowercase names, with API keys and tokens replaced by ``***``."""
    answered_by: AnsweredBy
    """Which rule produced the answer."""
    answered_at: float | None = None
    """When its answer was sent, after any ``delay_s`` (``time.time()``); None until then,
    or if the client left first. With ``at``, when the request was in flight."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict, as ``GET /_log`` lists it."""
        return asdict(self)


@dataclass(frozen=True)
class _Verdict:
    answer: Answer
    answered_by: AnsweredBy
    entry_index: int | None = None


class Playback:
    """A script being played: uses left per entry, the request log, fault dice and ids.

    Everything mutable sits behind one lock, so concurrent requests each take a distinct
    use of an entry and the log order is the order in which answers were decided.
    """

    def __init__(self, script: Script) -> None:
        self._script = script
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Forget the log, entries added at runtime, uses and ids: back to the script."""
        with self._lock:
            self._entries = list(self._script.entries)
            self._uses_left = [entry.times for entry in self._entries]
            self._log: list[LoggedRequest] = []
            self._ids = IdMint()
            self._set_faults(self._script.faults)

    def add(self, entries: Sequence[ScriptEntry]) -> None:
        with self._lock:
            self._entries.extend(entries)
            self._uses_left.extend(entry.times for entry in entries)

    def set_faults(self, faults: FaultInjection | None) -> None:
        with self._lock:
            self._set_faults(faults)

    def _set_faults(self, faults: FaultInjection | None) -> None:
        self._faults = faults
        self._dice = random.Random(faults.seed if faults else None)

    @property
    def requests(self) -> list[LoggedRequest]:
        with self._lock:
            return list(self._log)

    def receive(self, raw_body: bytes, headers: Mapping[str, str]) -> tuple[Answer, LoggedRequest]:
        """Decide the answer to one ``POST /v1/messages`` and log it; the answer, and the
        log entry to pass to :meth:`answered` once it is sent."""
        body = _json_object(raw_body)
        with self._lock:
            verdict = self._decide(body, headers)
            logged = _logged(body, headers, verdict)
            self._log.append(logged)
        return verdict.answer, logged

    def answered(self, logged: LoggedRequest) -> None:
        """Record when the answer to a logged request was sent (no-op after a reset)."""
        with self._lock:
            for index in range(len(self._log) - 1, -1, -1):
                if self._log[index] is logged:
                    self._log[index] = replace(logged, answered_at=time.time())
                    return

    def _decide(self, body: dict[str, Any] | None, headers: Mapping[str, str]) -> _Verdict:
        if not (headers.get("x-api-key") or headers.get("authorization")):
            message = "an x-api-key or authorization header is required (any value will do)"
            return _Verdict(error_answer(self._ids, 401, message), "rejected")
        if body is None:
            return _Verdict(error_answer(self._ids, 400, "body must be a JSON object"), "rejected")
        problem = _request_problem(body)
        if problem is not None:
            return _Verdict(error_answer(self._ids, 400, problem), "rejected")
        fault_status = self._roll_fault()
        if fault_status is not None:
            message = f"fake-anthropic: injected fault {fault_status}"
            return _Verdict(error_answer(self._ids, fault_status, message), "fault")
        return self._play(body)

    def _roll_fault(self) -> int | None:
        if self._faults is None or self._dice.random() >= self._faults.rate:
            return None
        return self._dice.choice(self._faults.statuses)

    def _play(self, body: dict[str, Any]) -> _Verdict:
        facts = RequestFacts.of(body)
        index = self._take_entry(facts)
        if index is not None:
            return _Verdict(entry_answer(self._entries[index], body, self._ids), "entry", index)
        if self._script.default is not None:
            return _Verdict(entry_answer(self._script.default, body, self._ids), "default")
        message = f"fake-anthropic: no script entry matches this request ({facts.describe()})"
        return _Verdict(error_answer(self._ids, 500, message), "no_match")

    def _take_entry(self, facts: RequestFacts) -> int | None:
        """Index of the first entry with uses left whose match holds, using one of its uses."""
        for index, entry in enumerate(self._entries):
            if self._uses_left[index] != 0 and entry.match.holds(facts):
                if self._uses_left[index] > 0:
                    self._uses_left[index] -= 1
                return index
        return None


def _json_object(raw_body: bytes) -> dict[str, Any] | None:
    try:
        parsed = json.loads(raw_body)
    except (ValueError, UnicodeDecodeError):
        return None
    return parsed if isinstance(parsed, dict) else None


def _request_problem(body: dict[str, Any]) -> str | None:
    """What the real API would reject in the body, worded as it words it; None if fine."""
    for name, expected in REQUIRED_FIELDS.items():
        if name not in body:
            return f"{name}: Field required"
        if not isinstance(body[name], expected) or isinstance(body[name], bool):
            return f"{name}: Input should be a valid {expected.__name__}"
    return None


def _logged(
    body: dict[str, Any] | None, headers: Mapping[str, str], verdict: _Verdict
) -> LoggedRequest:
    body = body if body is not None else {}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return LoggedRequest(
        at=time.time(),
        body=body,
        body_sha256=hashlib.sha256(canonical.encode()).hexdigest(),
        status=verdict.answer.status,
        entry_index=verdict.entry_index,
        headers={
            name: "***" if name in REDACTED_HEADERS else value for name, value in headers.items()
        },
        answered_by=verdict.answered_by,
    )
