"""Decoding what the run store reads: a run's hashes into a RunState, its stream entries
into Events, its status and counts.

Pure functions over redis-py replies (decoded to str), so the synchronous store
(store.py) and the asyncio reader (async_store.py) send their own commands and share one
reading of what comes back.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from dagwright.errors import UnknownRunError
from dagwright.models import (
    ErrorInfo,
    Event,
    NodeState,
    NodeStatus,
    NodeWait,
    RunCounts,
    RunState,
    RunStatus,
    Usage,
    event_of,
    from_ms,
)
from dagwright.orchestrator.runstate.creation import RUN_INPUTS_FIELD
from dagwright.workers.budgets import budget_of_run


def status_of(run_id: str, status: str | None) -> RunStatus:
    """The run's status from an HGET of its hash's ``status`` (UnknownRunError if none)."""
    if status is None:
        raise UnknownRunError(run_id)
    return RunStatus(status)


def counts_of(run_id: str, run: dict[str, str]) -> tuple[RunStatus, RunCounts]:
    """Status and node counts from an HGETALL of the run's hash."""
    if not run:
        raise UnknownRunError(run_id)
    return RunStatus(run["status"]), _counts(run)


def events_of(run_id: str, streams: Any) -> list[Event]:
    """The Events of an XREAD reply on the run's one events stream (none: empty)."""
    if not streams:
        return []
    [(_stream, entries)] = streams  # one stream asked, one answered
    return [event_of(run_id, entry_id, fields) for entry_id, fields in entries]


def waits_of(
    raw: dict[str, str], states: list[str | None], run: dict[str, str] | None = None
) -> dict[str, NodeWait]:
    """What each parked node waits on, from the run's ``waits`` hash and its nodes'
    states (HMGET, in the hash's order); ``run``: the run hash's fields a wait for its
    concurrency key reads."""
    found = {
        node_id: _wait(NodeStatus(state), raw[node_id], run)
        for node_id, state in zip(raw, states, strict=True)
        if state is not None
    }
    return {node_id: wait for node_id, wait in found.items() if wait is not None}


def state_columns(include_nodes: bool, include_outputs: bool) -> list[str]:
    columns = ["run"]
    if include_nodes:
        columns += ["state", "spec", "attempts", "started", "finished", "error", "usage", "waits"]
    if include_nodes and include_outputs:
        columns.append("output")
    return columns


# The columns compact.lua folds into the ``nodes`` string of a succeeded run, in the order
# of each row after its node id.
FOLDED_COLUMNS = ("state", "attempts", "started", "finished", "output")


# Of those, the ones compact.lua keeps as ms after the fold's ``since`` (the run's creation).
FOLDED_TIMES = frozenset({"started", "finished"})


def unfold(data: dict[str, dict[str, str]], folded: str | None) -> None:
    """Put back into ``data`` (column -> node -> value, as HGETALLs read them) the columns
    a compacted succeeded run keeps folded in its ``nodes`` string (None: not folded, the
    columns are read as they are). Only the columns ``data`` asked for are filled."""
    if folded is None:
        return
    fold = json.loads(folded)
    wanted = [column for column in FOLDED_COLUMNS if column in data]
    for column in wanted:
        data[column] = {}
    for node_id, *values in fold["rows"]:
        for column, value in zip(FOLDED_COLUMNS, values, strict=True):
            if value is not None and column in data:
                data[column][node_id] = _folded_value(column, value, fold["since"])


def _folded_value(column: str, value: str | int, since: int) -> str:
    """A folded value as its column held it: text, a time back to epoch ms."""
    if isinstance(value, str):
        return value
    return str(since + value if column in FOLDED_TIMES else value)


def folded_split(replies: list[Any], columns: int) -> tuple[list[dict[str, str]], str | None]:
    """The HGETALL replies of ``columns`` state columns and, if one follows, the GET of
    the run's ``nodes`` (see ``unfold``)."""
    return replies[:columns], replies[columns] if len(replies) > columns else None


def state_of(
    run_id: str, columns: list[str], replies: list[dict[str, str]], folded: str | None = None
) -> RunState:
    """A run's state from the HGETALL replies of its ``state_columns``, in that order, and
    the GET of its ``nodes`` (``folded``: a compacted succeeded run's node columns)
    (UnknownRunError if the run's hash is empty)."""
    data = dict(zip(columns, replies, strict=True))
    unfold(data, folded)
    run = data["run"]
    if not run:
        raise UnknownRunError(run_id)
    nodes = {node_id: _node_state(node_id, data) for node_id in data.get("state", {})}
    output_nodes = json.loads(run["output_nodes"])
    status = RunStatus(run["status"])
    with_result = status == RunStatus.SUCCEEDED and "output" in data
    return RunState(
        run_id=run_id,
        status=status,
        goal=run.get("goal", ""),
        created_at=from_ms(run["created_at"]),
        finished_at=from_ms(run.get("finished_at")),
        counts=_counts(run),
        output_nodes=output_nodes,
        nodes=nodes,
        result=_result(output_nodes, nodes) if with_result else None,
        usage=_run_usage(run),
        budget=budget_of_run(run),
        reason=run.get("stop_reason") or run.get("aged_out"),
        tearing_down=None
        if status.is_final or "stopping" not in run
        else RunStatus(run["stopping"]),
        response_cache=run.get("response_cache") == "1",
        inputs=json.loads(run.get(RUN_INPUTS_FIELD) or "{}"),
    )


def _run_usage(run: dict[str, str]) -> Usage:
    """The run's totals, kept in its hash by progress.lua (absent until an LLM call)."""
    return Usage(
        **{
            field: float(run[field]) if field == "cost_usd" else int(run[field])
            for field in Usage.model_fields
            if field in run
        }
    )


def _counts(run: dict[str, str]) -> RunCounts:
    return RunCounts(**{field: int(run.get(field, 0)) for field in RunCounts.model_fields})


def _node_state(node_id: str, data: dict[str, dict[str, str]]) -> NodeState:
    spec = json.loads(data["spec"][node_id])
    error = data["error"].get(node_id)
    raw_output = data.get("output", {}).get(node_id)
    raw_usage = data["usage"].get(node_id)
    status = NodeStatus(data["state"][node_id])
    return NodeState(
        status=status,
        type=spec["type"],
        depends_on=spec.get("depends_on", []),
        attempts=int(data["attempts"].get(node_id, 0)),
        started_at=from_ms(data["started"].get(node_id)),
        finished_at=from_ms(data["finished"].get(node_id)),
        output=json.loads(raw_output) if raw_output is not None else None,
        error=ErrorInfo.model_validate_json(error) if error else None,
        usage=Usage.model_validate_json(raw_usage) if raw_usage else Usage(),
        waiting=_wait(status, data.get("waits", {}).get(node_id), data["run"]),
    )


# The state a node is in while it waits on each kind of thing.
WAITING_STATUS = {
    "breaker": NodeStatus.RETRY_WAIT,
    "slot": NodeStatus.QUEUED,
    "batch": NodeStatus.RETRY_WAIT,
    "delay": NodeStatus.RETRY_WAIT,
    "concurrency": NodeStatus.RETRY_WAIT,
    "rate": NodeStatus.RETRY_WAIT,
    "celery_task": NodeStatus.RETRY_WAIT,
    "lost": NodeStatus.RETRY_WAIT,
}


def _wait(
    status: NodeStatus, raw: str | None, run: dict[str, str] | None = None
) -> NodeWait | None:
    """What a parked node waits on (retry.lua, park.lua and the flow control waits keep
    it; a node that moved on is no longer in the state of its wait, and has none). A wait
    for the run's concurrency key takes its numbers from the run hash (``run``), which
    admit.lua keeps up to date."""
    if raw is None:
        return None
    wait = json.loads(raw)
    if WAITING_STATUS.get(wait["on"]) != status:
        return None
    until_ms = wait.get("until_ms")
    limit, held = str(wait.get("limit") or ""), 0
    if wait["on"] == "concurrency" and run is not None:
        limit, held = run.get("concurrency_limit", ""), int(run.get("gate_held") or 0)
    return NodeWait(
        on=wait["on"],
        name=wait["name"],
        since=datetime.fromtimestamp(wait["since_ms"] / 1000, tz=UTC),
        until=datetime.fromtimestamp(until_ms / 1000, tz=UTC) if until_ms else None,
        last_failure=wait.get("last_failure") or "",
        limit=limit,
        held=held,
        count=int(wait.get("count") or 0),
    )


def _result(output_nodes: list[str], nodes: dict[str, NodeState]) -> Any:
    """One output node: its output. Several: their outputs keyed by node id."""
    if len(output_nodes) == 1:
        return nodes[output_nodes[0]].output
    return {node_id: nodes[node_id].output for node_id in output_nodes}
