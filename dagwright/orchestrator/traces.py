"""Reading a run's trace: its state, events and recorded spans in one round trip."""

from __future__ import annotations

import logging

from pydantic import ValidationError

from dagwright.orchestrator.runstore import RunStore, event_of
from dagwright.telemetry.spans import SPAN_FIELD, Span
from dagwright.telemetry.trace import Trace, build_trace

log = logging.getLogger(__name__)


def read_trace(store: RunStore, run_id: str) -> Trace:
    """The run's trace as of now (UnknownRunError if there is no such run)."""
    state, (events, recorded), now = store.read_with_streams(run_id, ("events", "spans"))
    return build_trace(
        state,
        (event_of(run_id, entry_id, fields) for entry_id, fields in events),
        recorded_spans(run_id, recorded),
        now,
    )


def recorded_spans(run_id: str, entries: list[tuple[str, dict[str, str]]]) -> list[Span]:
    """The spans of the ``spans`` stream; an entry that is not a Span is left out (a
    trace is for reading: one bad entry must not hide the rest)."""
    spans = []
    for entry_id, fields in entries:
        try:
            spans.append(Span.model_validate_json(fields.get(SPAN_FIELD, "")))
        except ValidationError:
            log.warning("run %s: spans entry %s is not a span; left out", run_id, entry_id)
    return spans
