"""The write orders that keep a run's step and a global structure (another Cluster slot)
consistent when a caller dies between them (docs/internals/cluster.md), on one Valkey;
tests/test_cluster.py runs them on a cluster too."""

from __future__ import annotations

import pytest

from dagwright.models import ErrorInfo, RunStatus
from dagwright.orchestrator.control.approvals import ApprovalBook
from dagwright.orchestrator.runstate.machine import Claim
from dagwright.orchestrator.runtime import Runtime
from dagwright.settings import Settings
from tests.support.runstate import claim, finish, start

ERROR = ErrorInfo(error_class="ValueError", message="bad input", retryable=False)


@pytest.fixture
def runtime(no_worker_settings: Settings) -> Runtime:
    return Runtime.from_settings(no_worker_settings)


def test_a_refused_fail_leaves_no_dead_letter_behind(runtime: Runtime) -> None:
    """The dead letter is added before fail.lua: refused (the claim was lost), it goes."""
    run_id, _ = start(runtime, [{"id": "a"}])
    assert isinstance(claim(runtime, run_id, "a"), Claim)
    assert runtime.machine.fail(run_id, "a", 7, ERROR) is None  # not our fence
    assert runtime.client.xlen(runtime.keys.dlq) == 0
    advance = runtime.machine.fail(run_id, "a", 1, ERROR)
    assert advance is not None and advance.run_finished == RunStatus.FAILED
    [(entry_id, fields)] = runtime.client.xrange(runtime.keys.dlq)
    assert (entry_id, fields["node"], fields["fence"]) == (advance.dead_letter, "a", "1")


def test_a_run_whose_caller_died_before_writing_it_leaves_the_active_set(
    runtime: Runtime,
) -> None:
    """A submit indexes the run first: an id naming no run is dropped by forget."""
    keys = runtime.keys
    runtime.client.sadd(keys.active_runs, "never-written")
    assert runtime.machine.forget("never-written").forgotten
    assert not runtime.client.sismember(keys.active_runs, "never-written")


def test_forget_keeps_a_run_open_again_in_the_active_set(runtime: Runtime) -> None:
    """Forget removes the run last and re-reads it: one re-opened meanwhile stays."""
    run_id, _ = start(runtime, [{"id": "a"}])
    finish(runtime, run_id, "a")
    assert runtime.store.run_status(run_id) == RunStatus.SUCCEEDED
    runtime.client.hset(runtime.keys.run_key(run_id, "run"), "status", "running")  # replayed
    assert not runtime.machine.forget(run_id).forgotten
    assert runtime.client.sismember(runtime.keys.active_runs, run_id)


def test_an_approval_indexed_before_its_node_waits_is_not_listed_nor_dropped(
    runtime: Runtime,
) -> None:
    """await_approval indexes first: until the node waits, the entry is neither shown
    nor taken away (a list in between would otherwise lose it)."""
    run_id, _ = start(runtime, [{"id": "a"}])
    assert isinstance(claim(runtime, run_id, "a"), Claim)
    member = f"{run_id}/a"
    runtime.client.zadd(runtime.keys.pending_approvals, {member: 2**40})
    assert ApprovalBook(runtime).pending() == []
    assert runtime.client.zscore(runtime.keys.pending_approvals, member) is not None
