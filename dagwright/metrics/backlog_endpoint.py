"""``GET /backlog``: the ready backlog of the deployment's queues as JSON, for autoscalers.

KEDA's metrics-api scaler reads one number out of a JSON answer by a GJSON path. The
number a worker type scales on is its queue's ready backlog (messages waiting plus pooled
nodes: orchestrator/execution/backlog.py), so ``/backlog?queue=dw.coder`` answers
``{"queue": "dw.coder", "ready": 9874, "waiting": 2, "pooled": 9872}`` and the trigger's
``valueLocation`` is ``ready``: no path to escape, whatever the queue's name.

Why this and not the others KEDA offers: its Redis scaler reads a list's length only
(the pooled nodes are a counter), its Prometheus scaler needs a Prometheus the chart does
not ship and adds a scrape interval of lag, and its metrics-api ``prometheus`` format
addresses a labelled series by a dotted path it does not document. This is one hop to
the same reader ``/metrics`` uses, read fresh at each poll (two round trips).

Answers: 200 with the queue's numbers; without ``queue``, every queue's under
``queues``; 404 for a queue no registered worker type serves (a typo in the chart would
otherwise read 0 forever and never scale); 503 when the state store cannot be read (KEDA
then keeps the replicas it has); 400 for an over-long query.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from dagwright.metrics.readings import MetricsReader
from dagwright.orchestrator.execution.backlog import ReadyBacklog

log = logging.getLogger(__name__)

PATH = "/backlog"
MAX_QUERY_CHARS = 1024  # a queue name is short; the query is bounded before parsing

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def with_backlog(app: WsgiApp, reader: MetricsReader) -> WsgiApp:
    """``app`` (the metrics), answering ``/backlog`` itself."""

    def route(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != PATH:
            return app(environ, start_response)
        status, body = backlog_answer(reader, str(environ.get("QUERY_STRING") or ""))
        payload = json.dumps(body).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
        start_response(status, headers)
        return [payload]

    return route


def backlog_answer(reader: MetricsReader, query: str) -> tuple[str, dict[str, Any]]:
    """The HTTP status and JSON body of a ``/backlog`` request."""
    if len(query) > MAX_QUERY_CHARS:
        return "400 Bad Request", problem(400, f"the query is over {MAX_QUERY_CHARS} characters")
    wanted = parse_qs(query).get("queue", [])
    try:
        backlogs = {backlog.queue: backlog for backlog in reader.backlogs()}
    except Exception as exc:  # an answer, whatever Redis does
        log.warning("backlog: cannot read the state store (%s)", type(exc).__name__)
        return "503 Service Unavailable", problem(503, "the state store cannot be read")
    if not wanted:
        return "200 OK", {"queues": {queue: as_json(b) for queue, b in backlogs.items()}}
    if wanted[0] not in backlogs:
        known = ", ".join(sorted(backlogs))
        return "404 Not Found", problem(
            404, f"no worker type serves {wanted[0]!r} (known: {known})"
        )
    return "200 OK", as_json(backlogs[wanted[0]])


def as_json(backlog: ReadyBacklog) -> dict[str, Any]:
    return {
        "queue": backlog.queue,
        "ready": backlog.ready,
        "waiting": backlog.waiting,
        "pooled": backlog.pooled,
    }


def problem(status: int, detail: str) -> dict[str, Any]:
    """An RFC 9457 problem body."""
    return {"type": "about:blank", "status": status, "detail": detail}
