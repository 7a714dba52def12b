"""One run's handle, and what a final run's state means to a caller (result or error)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from dagwright.errors import RunCancelledError, RunFailedError, RunNotFinishedError
from dagwright.models import Event, RunCounts, RunState, RunStatus

if TYPE_CHECKING:
    from dagwright.client.runs import Client

ProgressCallback = Callable[[RunStatus, RunCounts], None]

FINAL_RUN_EVENTS = frozenset(f"run.{status.value}" for status in RunStatus if status.is_final)


class RunHandle:
    """One run: ``status()``, ``wait()``, ``result()``, ``events()``, ``cancel()``."""

    def __init__(self, client: Client, run_id: str, *, created: bool = True) -> None:
        self.client = client
        self.run_id = run_id
        self.created = created
        """False when a submit's idempotency key named a run started earlier (HTTP's 200
        rather than 201)."""

    def __repr__(self) -> str:
        return f"RunHandle({self.run_id!r})"

    def status(self) -> RunState:
        return self.client.status(self.run_id)

    def wait(
        self, timeout: float | None = None, *, on_progress: ProgressCallback | None = None
    ) -> RunState:
        return self.client.wait(self.run_id, timeout, on_progress=on_progress)

    def result(self, timeout: float | None = None) -> Any:
        return self.client.result(self.run_id, timeout)

    def events(self, *, follow: bool = True, after: str = "0") -> Iterator[Event]:
        return self.client.events(self.run_id, follow=follow, after=after)

    def cancel(self, reason: str = "cancelled by a user") -> RunState:
        return self.client.cancel(self.run_id, reason)


def result_of(state: RunState) -> Any:
    """The result of a final run, or the typed error saying why there is none."""
    if state.status == RunStatus.SUCCEEDED:
        return state.result
    if state.status == RunStatus.CANCELLED:
        why = f": {state.reason}" if state.reason else ""
        raise RunCancelledError(f"run {state.run_id} was cancelled{why}", run_id=state.run_id)
    if state.status == RunStatus.FAILED:
        raise RunFailedError(describe_failure(state), run_id=state.run_id)
    raise RunNotFinishedError(
        f"run {state.run_id} is still {state.status.value}", run_id=state.run_id
    )


def still_running(
    run_id: str, status: RunStatus, counts: RunCounts, timeout: float | None
) -> RunNotFinishedError:
    """The error of a wait whose ``timeout`` passed before the run ended."""
    return RunNotFinishedError(
        f"run {run_id} is still {status.value} after {timeout:g}s "
        f"({counts.done}/{counts.total} nodes done); it keeps running",
        run_id=run_id,
    )


def describe_failure(state: RunState) -> str:
    if state.reason:  # stopped by its run timeout
        return f"run {state.run_id} failed: {state.reason}"
    failed = state.failed_nodes()
    if not failed:
        return f"run {state.run_id} failed"
    node_id, node = next(iter(failed.items()))
    error = node.error
    reason = f"{error.error_class}: {error.message}" if error else "no error recorded"
    more = f" (and {len(failed) - 1} more failed node(s))" if len(failed) > 1 else ""
    return f"run {state.run_id} failed: node {node_id!r} ({node.type}) {reason}{more}"
