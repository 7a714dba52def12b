"""Counters behind the Prometheus metrics, kept in Redis by the process that sees the thing.

Every increment goes to one hash per metric family (``Keys.metrics(family)``), whose fields
are the JSON lists of the label values and whose values are running totals. Any process
serves them (``dagwright.metrics`` reads the hashes at scrape time), so the totals are the
whole deployment's, exact, and outlive the process that counted them.

Rejected: prometheus_client counters in each process. Workers are prefork children that
come and go, SIGKILL included: their counts would be lost with them, or need the client's
multiprocess mode (files on one host, a directory to clean, still per host).

A histogram keeps one count per bucket, not cumulative (one HINCRBY per observation;
the reader adds them up), and its sum; its count is the sum of its buckets.

Writing is best effort: a metric must never fail the work it counts, so a Redis error is
logged once (until writes work again) and dropped.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import redis

from dagwright.keys import Keys
from dagwright.models import Usage

log = logging.getLogger(__name__)

# Metric families (the hash names under Keys.metrics).
LLM_CALLS = "llm_calls"  # labels: model
LLM_TOKENS = "llm_tokens"  # labels: model, kind
LLM_COST_USD = "llm_cost_usd"  # labels: model
LLM_UNPRICED_TOKENS = "llm_unpriced_tokens"  # labels: model (no price: cost unknown)
NODE_DURATION = "node_duration"  # labels: worker_type, outcome, bucket (or a sum field)
SANDBOX_EXECUTIONS = "sandbox_executions"  # labels: backend, outcome

# Node attempts last from milliseconds (a function) to an hour (an agent at its timeout).
DURATION_BUCKETS_S: tuple[float, ...] = (
    0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600,
)  # fmt: skip
INF_BUCKET = "+Inf"
SUM_FIELD = "sum"  # seconds, a float (HINCRBYFLOAT): what versions before 0.x counted
# The sum in whole microseconds: an HINCRBY, about a tenth of an HINCRBYFLOAT's Valkey CPU
# on the hot path (complete.lua counts it on every success). The reader adds both fields.
SUM_US_FIELD = "sum_us"

# Token kinds: the Usage field each one counts.
TOKEN_KINDS = {
    "input": "input_tokens",
    "output": "output_tokens",
    "cache_read": "cache_read_input_tokens",
    "cache_write": "cache_creation_input_tokens",
}


@dataclass(frozen=True)
class Increment:
    """Add ``amount`` to the counter of ``family`` with these label values."""

    family: str
    labels: tuple[str, ...]
    amount: int | float = 1


def field_of(labels: Sequence[str]) -> str:
    """The hash field of a label set (JSON: any label value round-trips)."""
    return json.dumps(list(labels), separators=(",", ":"))


def labels_of(field: str) -> tuple[str, ...]:
    return tuple(json.loads(field))


def bucket_of(seconds: float) -> str:
    """The (non-cumulative) bucket an observation falls in, by its upper bound."""
    for bound in DURATION_BUCKETS_S:
        if seconds <= bound:
            return format_bound(bound)
    return INF_BUCKET


def format_bound(bound: float) -> str:
    return repr(float(bound))


def llm_usage(model: str, usage: Usage) -> list[Increment]:
    """One LLM call's usage (a cache hit's is all zeros: nothing to add)."""
    amounts: list[tuple[str, tuple[str, ...], int | float]] = [
        (LLM_CALLS, (model,), usage.llm_calls),
        *((LLM_TOKENS, (model, kind), getattr(usage, name)) for kind, name in TOKEN_KINDS.items()),
        (LLM_COST_USD, (model,), usage.cost_usd),
        (LLM_UNPRICED_TOKENS, (model,), usage.unpriced_tokens),
    ]
    return [Increment(family, labels, amount) for family, labels, amount in amounts if amount]


def node_duration(worker_type: str, outcome: str, seconds: float) -> list[Increment]:
    """One node attempt that ended with ``outcome`` after ``seconds``."""
    return NodeDuration(worker_type, outcome, seconds).increments()


@dataclass(frozen=True)
class NodeDuration:
    """One node attempt that ended with ``outcome`` after ``seconds``: sent through
    ``Counters.add`` (``increments``), or by the script that records the outcome
    (``fields``: the hot path's completion counts it at no extra round trip)."""

    worker_type: str
    outcome: str
    seconds: float

    def fields(self) -> tuple[str, str, int]:
        """The bucket's field (add 1), the sum's field, and the microseconds to add to it."""
        seconds = max(float(self.seconds), 0.0)
        labels = (self.worker_type, self.outcome)
        total = field_of((*labels, SUM_US_FIELD))
        return field_of((*labels, bucket_of(seconds))), total, round(seconds * 1e6)

    def increments(self) -> list[Increment]:
        bucket, total, micros = self.fields()
        increments = [Increment(NODE_DURATION, labels_of(bucket))]
        if micros:
            increments.append(Increment(NODE_DURATION, labels_of(total), micros))
        return increments


def sandbox_execution(backend: str, outcome: str) -> list[Increment]:
    """One program run by the sandbox ``backend`` (outcome ok|error|timeout|oom|cancelled)."""
    return [Increment(SANDBOX_EXECUTIONS, (backend, outcome))]


class Counters:
    """Adds increments to the deployment's counters, one pipelined round trip a call."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._failing = False
        self._lock = threading.Lock()

    def add(self, increments: Sequence[Increment]) -> None:
        """Send the increments; never raises (see the module docstring)."""
        if not increments:
            return
        try:
            pipe = self.client.pipeline(transaction=False)
            for increment in increments:
                key, field = self.keys.metrics(increment.family), field_of(increment.labels)
                if isinstance(increment.amount, int):
                    pipe.hincrby(key, field, increment.amount)
                else:
                    pipe.hincrbyfloat(key, field, increment.amount)
            pipe.execute()
        except Exception as exc:  # whatever it is, the work counted must go on
            self._note_failure(exc)
            return
        self._failing = False

    def _note_failure(self, exc: Exception) -> None:
        with self._lock:
            first, self._failing = not self._failing, True
        if first:
            log.warning(
                "metrics counters not recorded (%s: %s); dropping them until Redis answers",
                type(exc).__name__,
                exc,
            )


def duration_sum(fields: dict[str, float]) -> float:
    """A node-duration series' sum in seconds, from either sum field (``SUM_US_FIELD``)."""
    return fields.get(SUM_FIELD, 0.0) + fields.get(SUM_US_FIELD, 0.0) / 1e6


def decode_counters(raw: dict[str, str]) -> dict[tuple[str, ...], float]:
    """A family's hash as read back (HGETALL): counter by label values."""
    return {labels_of(field): float(value) for field, value in raw.items()}
