"""The decision half of the fake Anthropic API: which answer a request gets, and the log.

Kept apart from the HTTP half (:mod:`dagwright.testing.fake_anthropic`) so the playback
rules (validation, fault rolls, script entries in order) read without the server around them.
What a valid request is lives in :mod:`dagwright.testing.fake_anthropic_rules`; token and
cache accounting in :mod:`dagwright.testing.fake_anthropic_tokens`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from dagwright.llm.sdk_models import sdk_model_ids
from dagwright.testing.fake_anthropic_answers import (
    Answer,
    IdMint,
    entry_answer,
    error_answer,
    json_answer,
)
from dagwright.testing.fake_anthropic_batches import batch_result
from dagwright.testing.fake_anthropic_context import context_management_problem, managed_prompt
from dagwright.testing.fake_anthropic_memory import (
    MEMORY_TOOL_NAME,
    memory_command_problem,
    offers_memory,
)
from dagwright.testing.fake_anthropic_rules import Rejection, request_rejection
from dagwright.testing.fake_anthropic_script import (
    FaultInjection,
    RequestFacts,
    Script,
    ScriptedServerToolUse,
    ScriptedToolUse,
    ScriptEntry,
)
from dagwright.testing.fake_anthropic_server_tools import offered_server_tools
from dagwright.testing.fake_anthropic_skills import misplayed_skill_call
from dagwright.testing.fake_anthropic_tokens import (
    InputUsage,
    PromptCache,
    count_input_tokens,
    prompt_blocks,
)

AnsweredBy = Literal["entry", "default", "fault", "no_match", "rejected", "count_tokens"]
Endpoint = Literal["messages", "count_tokens", "batch"]
REDACTED_HEADERS = frozenset({"x-api-key", "authorization"})
UNOFFERED = (
    "fake-anthropic: the script plays a {name} call, but the request does not offer the "
    "{name} server tool"
)
UNSCRIPTED = (
    "fake-anthropic: no script entry matches this request ({facts}); add an entry that "
    "matches it, or a default, to the script"
)


@dataclass(frozen=True)
class LoggedRequest:
    """One ``POST /v1/messages`` (or ``/v1/messages/count_tokens``) the server received,
    and how it answered."""

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
    endpoint: Endpoint = "messages"
    """``messages`` (a Messages call) or ``count_tokens``."""

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

    def __init__(
        self,
        script: Script,
        *,
        extra_models: Sequence[str] = (),
        cache: PromptCache | None = None,
        today: Callable[[], dt.date] | None = None,
    ) -> None:
        self._script = script
        self._today = today  # None: the UTC date (models retire on the real calendar)
        self._models = sdk_model_ids() | set(script.models) | set(extra_models)
        self._cache = cache if cache is not None else PromptCache()
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Forget the log, entries added at runtime, uses and ids: back to the script."""
        with self._lock:
            self._entries = list(self._script.entries)
            self._uses_left = [entry.times for entry in self._entries]
            self._log: list[LoggedRequest] = []
            self._ids = IdMint()
            self._cache.clear()
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

    def count_tokens(
        self, raw_body: bytes, headers: Mapping[str, str]
    ) -> tuple[Answer, LoggedRequest]:
        """Answer one ``POST /v1/messages/count_tokens``: the same checks, no script."""
        body = _json_object(raw_body)
        with self._lock:
            verdict = self._refusal(body, headers, counting_tokens=True)
            if verdict is None:
                assert body is not None  # _refusal refuses a body that is not an object
                answer = json_answer(200, {"input_tokens": count_input_tokens(body)})
                verdict = _Verdict(answer, "count_tokens")
            logged = _logged(body, headers, verdict, endpoint="count_tokens")
            self._log.append(logged)
        return verdict.answer, logged

    def play_batched(self, params: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
        """Play one request of a message batch as ``POST /v1/messages`` would (its rules,
        faults and script), logged with ``endpoint: batch``: its batch result. A batch
        never streams, so a ``stream`` parameter is refused as the API refuses it."""
        with self._lock:
            if "stream" in params:
                message = "stream: Extra inputs are not permitted in a Message Batch request"
                verdict = self._rejected(Rejection(message))
            else:
                verdict = self._decide(params, headers)
            self._log.append(_logged(params, headers, verdict, endpoint="batch"))
        return batch_result(verdict.answer)

    def answered(self, logged: LoggedRequest) -> None:
        """Record when the answer to a logged request was sent (no-op after a reset)."""
        with self._lock:
            for index in range(len(self._log) - 1, -1, -1):
                if self._log[index] is logged:
                    self._log[index] = replace(logged, answered_at=time.time())
                    return

    def _decide(self, body: dict[str, Any] | None, headers: Mapping[str, str]) -> _Verdict:
        refusal = self._refusal(body, headers, counting_tokens=False)
        if refusal is not None:
            return refusal
        assert body is not None  # _refusal refuses a body that is not an object
        fault_status = self._roll_fault()
        if fault_status is not None:
            message = f"fake-anthropic: injected fault {fault_status}"
            return _Verdict(error_answer(self._ids, fault_status, message), "fault")
        return self._play(body)

    def _refusal(
        self, body: dict[str, Any] | None, headers: Mapping[str, str], *, counting_tokens: bool
    ) -> _Verdict | None:
        """The answer to a request the real API would refuse; None for a valid one."""
        if not (headers.get("x-api-key") or headers.get("authorization")):
            message = "an x-api-key or authorization header is required (any value will do)"
            return self._rejected(Rejection(message, 401, "authentication_error"))
        if body is None:
            return self._rejected(Rejection("body must be a JSON object"))
        today = self._today() if self._today is not None else None
        rejection = request_rejection(
            body, self._models, counting_tokens=counting_tokens, today=today
        )
        if rejection is None and (problem := context_management_problem(body, headers)):
            rejection = Rejection(problem)
        return self._rejected(rejection) if rejection is not None else None

    def _rejected(self, rejection: Rejection) -> _Verdict:
        answer = error_answer(self._ids, rejection.status, rejection.message, rejection.error_type)
        return _Verdict(answer, "rejected")

    def _roll_fault(self) -> int | None:
        if self._faults is None or self._dice.random() >= self._faults.rate:
            return None
        return self._dice.choice(self._faults.statuses)

    def _play(self, body: dict[str, Any]) -> _Verdict:
        facts = RequestFacts.of(body)
        index = self._take_entry(facts)
        if index is not None:
            return _Verdict(self._answer(self._entries[index], body), "entry", index)
        if self._script.default is not None:
            return _Verdict(self._answer(self._script.default, body), "default")
        # A 400, not a 500: a client retries a 500 and opens its breaker over a script gap.
        message = UNSCRIPTED.format(facts=facts.describe())
        return _Verdict(error_answer(self._ids, 400, message), "no_match")

    def _answer(self, entry: ScriptEntry, body: dict[str, Any]) -> Answer:
        """The entry's answer; only a reply reads and writes the prompt cache, as only a
        request the model served does, and counts the prompt as its context edits left it."""
        usage = InputUsage(input_tokens=0)
        seen, context_management = managed_prompt(body)
        if entry.reply is not None:
            unoffered = _unoffered_server_tool(entry, body)
            if unoffered is not None:  # the model can only call a server tool it is given
                message = UNOFFERED.format(name=unoffered)
                return error_answer(self._ids, 400, message)
            misplayed = _misplayed_memory_call(entry, body) or misplayed_skill_call(
                _client_calls(entry), body
            )
            if misplayed is not None:
                return error_answer(self._ids, 400, f"fake-anthropic: {misplayed}")
            usage = self._cache.account(body["model"], prompt_blocks(seen))
        return entry_answer(entry, body, self._ids, usage, context_management)

    def _take_entry(self, facts: RequestFacts) -> int | None:
        """Index of the first entry with uses left whose match holds, using one of its uses."""
        for index, entry in enumerate(self._entries):
            if self._uses_left[index] != 0 and entry.match.holds(facts):
                if self._uses_left[index] > 0:
                    self._uses_left[index] -= 1
                return index
        return None


def _unoffered_server_tool(entry: ScriptEntry, body: dict[str, Any]) -> str | None:
    """A server tool the entry's reply calls that the request does not offer."""
    assert entry.reply is not None
    offered = offered_server_tools(body)
    called = [b.name for b in entry.reply.content if isinstance(b, ScriptedServerToolUse)]
    return next((name for name in called if name not in offered), None)


def _client_calls(entry: ScriptEntry) -> list[tuple[str, dict[str, Any]]]:
    assert entry.reply is not None
    return [(b.name, b.input) for b in entry.reply.content if isinstance(b, ScriptedToolUse)]


def _misplayed_memory_call(entry: ScriptEntry, body: dict[str, Any]) -> str | None:
    """Why the entry's memory call is one the model could not make (the request does not
    offer the memory tool, or the input is no memory command); None if it could."""
    assert entry.reply is not None
    for block in entry.reply.content:
        if not isinstance(block, ScriptedToolUse) or block.name != MEMORY_TOOL_NAME:
            continue
        if not offers_memory(body):
            return "the script plays a memory call, but the request does not offer the memory tool"
        problem = memory_command_problem(block.input)
        if problem is not None:
            return f"the script plays a malformed memory call: {problem}"
    return None


def _json_object(raw_body: bytes) -> dict[str, Any] | None:
    try:
        parsed = json.loads(raw_body)
    except (ValueError, UnicodeDecodeError):
        return None
    return parsed if isinstance(parsed, dict) else None


def _logged(
    body: dict[str, Any] | None,
    headers: Mapping[str, str],
    verdict: _Verdict,
    endpoint: Endpoint = "messages",
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
        endpoint=endpoint,
    )
