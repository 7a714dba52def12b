"""Reading a run's trace: its state, events and recorded spans in one round trip."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pydantic import ValidationError

from dagwright.models import event_of
from dagwright.telemetry.run_trace import Trace, build_trace
from dagwright.telemetry.spans import SPAN_FIELD, Span

if TYPE_CHECKING:  # the reader is passed in: telemetry sits below the orchestrator
    from dagwright.orchestrator.runstate.store import RunStore

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
