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


# -- a run past its maximum age: mark, dead letters, failures (machine.py age_out) ---------

MAX_AGE_S = 3600
AGED_PLAN = [{"id": "a"}, {"id": "b"}, {"id": "c", "depends_on": ["a", "b"]}]


class CallerDied(Exception):
    """What a caller killed between two steps leaves: the steps before, none after."""


def too_old(runtime: Runtime) -> str:
    """A run of AGED_PLAN open past MAX_AGE_S, its node a running, b queued."""
    run_id, _ = start(runtime, AGED_PLAN)
    assert isinstance(claim(runtime, run_id, "a"), Claim)
    key = runtime.keys.run_key(run_id, "run")
    created = int(runtime.client.hget(key, "created_at") or 0)
    runtime.client.hset(key, "created_at", created - (MAX_AGE_S + 1) * 1000)
    return run_id


def letters_of(runtime: Runtime, run_id: str) -> dict[str, str]:
    """node -> entry id of the run's dead letters in the DLQ stream (one each, or fail)."""
    stream = runtime.client.xrange(runtime.keys.dlq)
    entries = [(entry, fields["node"]) for entry, fields in stream if fields["run"] == run_id]
    assert len({node for _, node in entries}) == len(entries), entries  # none twice
    return {node: entry for entry, node in entries}


def failures_named(runtime: Runtime, run_id: str) -> dict[str, str]:
    """node -> the dead letter its node.failed event names."""
    events = runtime.client.xrange(runtime.keys.run_key(run_id, "events"))
    return {f["node"]: f["dead_letter"] for _, f in events if f.get("kind") == "node.failed"}


@pytest.mark.parametrize("dies_in", ["_aged_out_letters", "_fail_aged"])
def test_an_age_out_whose_caller_died_between_its_steps_is_finished_by_the_next_once(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch, dies_in: str
) -> None:
    """Killed before its dead letters (the run marked only) or after them (not failed
    yet), the next call fails the run with one dead letter per node: those a dead caller
    added are found and named, none is added twice."""
    run_id = too_old(runtime)

    def dies(*args: object) -> object:
        raise CallerDied

    monkeypatch.setattr(runtime.machine, dies_in, dies)
    with pytest.raises(CallerDied):
        runtime.machine.age_out(run_id, MAX_AGE_S)
    monkeypatch.undo()
    left = letters_of(runtime, run_id)
    assert sorted(left) == ([] if dies_in == "_aged_out_letters" else ["a", "b"])
    assert runtime.store.run_status(run_id) == RunStatus.RUNNING  # nothing failed yet

    aged = runtime.machine.age_out(run_id, MAX_AGE_S)
    assert aged.status == RunStatus.FAILED and aged.dead_letters == 2
    letters = letters_of(runtime, run_id)
    assert sorted(letters) == ["a", "b"] and failures_named(runtime, run_id) == letters
    assert all(letters[node] == entry for node, entry in left.items())  # reused


def test_an_age_out_deletes_the_dead_letter_of_a_node_that_ended_between_its_steps(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """a succeeds after its dead letter was added: its failure is refused, its letter goes."""
    run_id = too_old(runtime)
    add_letters = runtime.machine._aged_out_letters

    def then_a_succeeds(*args: object) -> object:
        found = add_letters(*args)  # type: ignore[arg-type]
        runtime.machine.complete(run_id, "a", 1, '"A"')
        return found

    monkeypatch.setattr(runtime.machine, "_aged_out_letters", then_a_succeeds)
    aged = runtime.machine.age_out(run_id, MAX_AGE_S)
    assert aged.status == RunStatus.FAILED and aged.dead_letters == 1
    assert list(letters_of(runtime, run_id)) == ["b"] == list(failures_named(runtime, run_id))
    state = runtime.store.read_state(run_id)
    assert {n: node.status.value for n, node in state.nodes.items()} == {
        "a": "succeeded", "b": "failed", "c": "blocked"
    }  # fmt: skip
