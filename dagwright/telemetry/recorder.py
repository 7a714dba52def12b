"""Recording spans into a run's ``spans`` stream, from inside the workers.

Telemetry never fails a node: a Redis error while recording drops the span and is logged,
at most once a minute per recorder (one per worker process), not once per span. Text
attributes are redacted here (``dagwright.redaction``), the one way into the stream.

Expiry. A run's keys get their retention TTL when the run ends (``finish_run`` in the
run state machine's Lua prelude); a replay takes it off again. A span can still arrive after the
end (a tool thread that outlived its node's timeout, a late breaker event), and must not
leave a stream that never expires. So the stream follows the run hash, in the script
that appends the span (one round trip):

- run hash with a TTL (the run ended): the stream gets the same TTL;
- run hash without one (still running): nothing; ``finish_run`` expires the stream too;
- no run hash (expired or deleted): the span is dropped rather than recreating a key.

Rejected: ``EXPIRE spans <retention> NX`` after each XADD. It starts the clock of a running
run's stream at its first span, so a run that runs longer than the retention (60 s at
least) would lose its early spans before it ends.
"""

from __future__ import annotations

import logging
import threading
import time

import redis

from dagwright.keys import Keys
from dagwright.redaction import known_secrets, redact
from dagwright.redis_scripts import load_script, named_reply
from dagwright.settings import Settings
from dagwright.telemetry.spans import SPAN_FIELD, Span

log = logging.getLogger(__name__)

WARN_INTERVAL_S = 60.0


class SpanRecorder:
    """Appends spans to their run's ``spans`` stream (nothing if tracing is off)."""

    def __init__(self, client: redis.Redis, keys: Keys, settings: Settings) -> None:
        self.client = client
        self.keys = keys
        self.enabled = settings.telemetry.trace_enabled
        self.maxlen = settings.telemetry.trace_maxlen
        self._secrets = known_secrets(settings)
        self._script = load_script(client, "dagwright.telemetry", "record_span")
        self._lock = threading.Lock()
        self._quiet_until = 0.0

    def record(self, run_id: str, span: Span) -> bool:
        """Append ``span``; False if it was dropped (tracing off, the run gone, Redis down)."""
        if not self.enabled:
            return False
        keys = [self.keys.run_key(run_id, "spans"), self.keys.run_key(run_id, "run")]
        args = [self.maxlen, SPAN_FIELD, redacted(span, self._secrets).model_dump_json()]
        try:
            fields = named_reply(self._script(keys=keys, args=args))
        except redis.RedisError as exc:
            self._warn(exc)
            return False
        return bool(int(fields["written"]))

    def _warn(self, exc: redis.RedisError) -> None:
        now = time.monotonic()
        with self._lock:
            if now < self._quiet_until:
                return
            self._quiet_until = now + WARN_INTERVAL_S
        log.warning(
            "spans are not being recorded (%s: %s); traces will miss them (said once a minute)",
            type(exc).__name__,
            redact(str(exc), self._secrets),
        )


def redacted(span: Span, secrets: tuple[str, ...]) -> Span:
    """``span`` with its text attributes redacted: whatever the timed block put there
    leaves the worker (the trace, the OTLP export)."""
    attributes = {
        name: redact(value, secrets) if isinstance(value, str) else value
        for name, value in span.attributes.items()
    }
    return span.model_copy(update={"attributes": attributes})
