"""The JSON body of a webhook delivery: what ended, how, and the result (size-capped).

No secret and no node outputs other than the result: a receiver that wants more reads
the run through the client or the HTTP API with its ``run_id``.
"""

from __future__ import annotations

import json
from typing import Any

from dagwright.models import RunState

RESULT_MAX_BYTES = 64 * 1024
"""Largest result sent inline; a bigger one is left out (``result_truncated``: true,
``result_bytes`` its size), to be read through the API."""


def delivery_body(delivery_id: str, event: str, state: RunState) -> bytes:
    """The body of ``delivery_id`` (the same bytes on every attempt of it)."""
    body: dict[str, Any] = {
        "delivery_id": delivery_id,
        "event": event,
        "run_id": state.run_id,
        "status": state.status.value,
        "goal": state.goal,
        "created_at": state.created_at.isoformat(),
        "finished_at": state.finished_at.isoformat() if state.finished_at else None,
        "reason": state.reason,
        "counts": state.counts.model_dump(mode="json"),
        "usage": state.usage.model_dump(mode="json"),
    }
    body.update(_result_fields(state.result))
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def _result_fields(result: Any) -> dict[str, Any]:
    encoded = json.dumps(result, separators=(",", ":"))
    if len(encoded.encode()) <= RESULT_MAX_BYTES:
        return {"result": result, "result_truncated": False}
    return {"result": None, "result_truncated": True, "result_bytes": len(encoded.encode())}
