"""Dead letters and their replay, on the Lua state machine of a real Valkey (no Celery)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagwright.dlq import Classification, DeadLetterFilter, DeadLetterStatus
from dagwright.errors import (
    DeadLetterError,
    InputError,
    PoisonMessageError,
    WorkersLostError,
)
from dagwright.models import ErrorInfo, Node, RunStatus
from dagwright.orchestrator.control.dead_letter_replay import dead_letters, replay, replay_matching
from dagwright.orchestrator.execution.poison import refused_delivery
from dagwright.orchestrator.runstate.machine import (
    Claim,
    LeaseRef,
    LossBackoff,
    Replayed,
    ReplayRefused,
)
from dagwright.orchestrator.runtime import Runtime
from dagwright.settings import Settings
from tests.support.cli import cli_env, dagwright, json_out, one_error_line
from tests.support.runstate import RecordingBroker, claim, finish, kinds, start
from tests.support.waiting import wait_until

ERROR = ErrorInfo(
    error_class="ValueError", message="bad input", retryable=False, traceback="Traceback: ..."
)


@pytest.fixture
def runtime(no_worker_settings: Settings) -> Runtime:
    return Runtime.from_settings(no_worker_settings)


def chain_failed_at_b(runtime: Runtime) -> str:
    """a -> b -> c with b failed for good: the run has ended FAILED, c is blocked."""
    run_id, _ = start(
        runtime, [{"id": "a"}, {"id": "b", "depends_on": ["a"]}, {"id": "c", "depends_on": ["b"]}]
    )
    finish(runtime, run_id, "a", output='"from a"')
    assert isinstance(claim(runtime, run_id, "b"), Claim)
    advance = runtime.machine.fail(run_id, "b", 1, ERROR, classification="permanent")
    assert advance is not None and advance.run_finished == RunStatus.FAILED
    assert advance.dead_letter
    return run_id


def test_a_final_failure_writes_one_dead_letter_with_everything_needed_to_replay(
    runtime: Runtime,
) -> None:
    run_id = chain_failed_at_b(runtime)
    assert runtime.machine.fail(run_id, "b", 1, ERROR) is None  # a duplicate: no second entry
    [letter] = dead_letters(runtime).find()
    assert (letter.run_id, letter.node_id, letter.fence, letter.worker_type) == (
        run_id,
        "b",
        1,
        "function",
    )
    assert letter.spec["function"] == "noop" and letter.spec["depends_on"] == ["a"]
    assert (letter.error_class, letter.message, letter.traceback) == (
        "ValueError",
        "bad input",
        "Traceback: ...",
    )
    assert letter.classification == Classification.PERMANENT
    assert letter.status == DeadLetterStatus.PENDING and letter.attempts == 1
    assert letter.first_failure_at <= letter.last_failure_at
    failed = [e for e in runtime.store.read_events(run_id) if e.kind == "node.failed"]
    assert failed[0].data["dead_letter"] == letter.id


def test_replay_reopens_the_run_unblocks_dependents_and_keeps_completed_nodes(
    runtime: Runtime,
) -> None:
    run_id = chain_failed_at_b(runtime)
    [letter] = dead_letters(runtime).find()
    broker = RecordingBroker()

    result = replay(runtime, broker, letter)
    assert result.replayed and result.reopened
    assert [(n.node_id, n.fence) for n in broker.published] == [("b", 2)]
    state = runtime.store.read_state(run_id)
    assert state.status == RunStatus.RUNNING
    assert {nid: n.status.value for nid, n in state.nodes.items()} == {
        "a": "succeeded",
        "b": "queued",
        "c": "pending",
    }
    assert runtime.client.sismember(runtime.keys.active_runs, run_id)
    assert not runtime.machine.forget(run_id)  # the reconciler keeps watching it

    replayed = claim(runtime, run_id, "b", fence=2)
    assert isinstance(replayed, Claim) and replayed.inputs == {"a": "from a"}
    assert runtime.machine.complete(run_id, "b", 2, '"fixed"') is not None
    assert finish(runtime, run_id, "c").run_finished == RunStatus.SUCCEEDED
    assert runtime.store.read_state(run_id).status == RunStatus.SUCCEEDED
    assert kinds(runtime, run_id).count("node.succeeded") == 3
    assert {"run.reopened", "node.replayed", "node.unblocked"} <= set(kinds(runtime, run_id))
    assert dead_letters(runtime).get(letter.id).status == DeadLetterStatus.REPLAYED


def test_a_dead_letter_is_replayed_once_only(runtime: Runtime) -> None:
    chain_failed_at_b(runtime)
    [letter] = dead_letters(runtime).find()
    assert replay(runtime, RecordingBroker(), letter).replayed
    again = replay(runtime, RecordingBroker(), letter)
    assert not again.replayed and again.reason == "it was replayed already"
    assert replay_matching(runtime, RecordingBroker(), DeadLetterFilter()) == []


def test_a_cancelled_run_is_not_replayed(runtime: Runtime) -> None:
    run_id, _ = start(runtime, [{"id": "a"}, {"id": "b"}])
    claim(runtime, run_id, "a")
    runtime.machine.fail(run_id, "a", 1, ERROR)
    runtime.machine.cancel(run_id, "enough")
    [letter] = dead_letters(runtime).find()
    result = replay(runtime, RecordingBroker(), letter)
    assert not result.replayed and "cancelled" in result.reason
    assert dead_letters(runtime).get(letter.id).status == DeadLetterStatus.PENDING


def test_replay_refuses_a_node_that_is_not_failed_or_a_stale_fence(runtime: Runtime) -> None:
    run_id, _ = start(runtime, [{"id": "a"}])
    refused = runtime.machine.replay(run_id, "a", 1, entry_id="1-1")
    assert isinstance(refused, ReplayRefused) and not refused.done
    claim(runtime, run_id, "a")
    runtime.machine.fail(run_id, "a", 1, ERROR)
    stale = runtime.machine.replay(run_id, "a", 0, entry_id="1-2")
    assert isinstance(stale, ReplayRefused)
    assert isinstance(runtime.machine.replay(run_id, "a", 1, entry_id="1-3"), Replayed)


def test_fresh_replay_drops_the_checkpoint_and_a_plain_one_keeps_it(runtime: Runtime) -> None:
    from dagwright.orchestrator.runstate.machine import LeaseRef

    for fresh, expected in ((False, {"turn": 3}), (True, None)):
        run_id, _ = start(runtime, [{"id": "a"}])
        claim(runtime, run_id, "a")
        lease = LeaseRef(run_id, "a", 1)
        assert runtime.machine.record_progress(lease, lease_s=30, checkpoint_json='{"turn": 3}')
        advance = runtime.machine.fail(run_id, "a", 1, ERROR)
        assert advance is not None and advance.dead_letter
        letter = dead_letters(runtime).get(advance.dead_letter)
        assert replay(runtime, RecordingBroker(), letter, fresh=fresh).replayed
        replayed = claim(runtime, run_id, "a", fence=2)
        assert isinstance(replayed, Claim) and replayed.checkpoint == expected


def test_deaths_count_what_a_parent_saw_losses_the_expired_leases(runtime: Runtime) -> None:
    # Issue 31: only a death seen by the worker's surviving parent counts towards poison;
    # a lease that expired (a worker lost whole) is a loss, delivered again after a backoff.
    run_id, _ = start(runtime, [{"id": "a"}])
    first = claim(runtime, run_id, "a", holder="host:1", lease_s=0.2)
    assert isinstance(first, Claim) and (first.deaths, first.losses) == (0, 0)
    assert runtime.machine.record_death(LeaseRef(run_id, "a", 7), "signal 9") == 0  # stale
    assert runtime.machine.record_death(LeaseRef(run_id, "a", 1), "signal 9") == 1
    second = claim(runtime, run_id, "a", holder="host:2", takeover="host:1", lease_s=0.2)
    assert isinstance(second, Claim) and (second.deaths, second.losses) == (1, 0)
    assert "node.process_died" in kinds(runtime, run_id)

    backoff = LossBackoff(base_s=0.3, max_s=10)
    requeued = wait_until(
        lambda: (
            runtime.machine.reconcile_run(
                run_id, publish_grace_s=60, stranded_after_s=60, loss_backoff=backoff
            ).requeued
            or runtime.store.waits(run_id).get("a")
        ),
        what="the lease to expire",
    )
    assert requeued == runtime.store.waits(run_id)["a"]  # it waits, not re-queued at once
    assert requeued.on == "lost" and requeued.count == 1 and requeued.name == "host:2"
    assert requeued.until is not None and requeued.until > requeued.since
    assert requeued.describe().startswith("waiting for re-delivery after its worker was lost")
    wait_until(
        lambda: (
            runtime.machine.reconcile_run(run_id, publish_grace_s=60, stranded_after_s=60).requeued
        ),
        what="the re-delivery, due after the backoff",
    )
    third = claim(runtime, run_id, "a", fence=2, holder="host:3")
    assert isinstance(third, Claim) and (third.deaths, third.losses) == (1, 1)
    runtime.machine.schedule_retry(run_id, "a", 2, ERROR, delay_s=0)  # an outcome: forgotten
    wait_until(
        lambda: (
            runtime.machine.reconcile_run(run_id, publish_grace_s=60, stranded_after_s=60).requeued
        ),
        what="the retry",
    )
    fourth = claim(runtime, run_id, "a", fence=3, holder="host:4")
    assert isinstance(fourth, Claim) and (fourth.deaths, fourth.losses) == (0, 0)


def test_a_poison_guard_tells_deaths_from_losses(runtime: Runtime) -> None:
    settings = runtime.settings.model_copy(update={"max_deliveries": 2, "max_worker_losses": 3})
    node = Node.model_validate({"id": "a", "type": "function", "function": "count"})
    refused = refused_delivery(settings, Claim(node, attempt=5, inputs={}, deaths=1, losses=3))
    assert refused is None  # three whole workers lost: still delivered
    poison = refused_delivery(settings, Claim(node, attempt=3, inputs={}, deaths=2))
    assert isinstance(poison, PoisonMessageError) and "died 2 times" in str(poison)
    lost = refused_delivery(settings, Claim(node, attempt=5, inputs={}, losses=4))
    assert isinstance(lost, WorkersLostError) and "lost 4 times" in str(lost)


def test_filters_stats_purge_and_typed_errors(runtime: Runtime) -> None:
    from dagwright.client.dead_letters import dlq_filter

    run_one = chain_failed_at_b(runtime)
    run_two, _ = start(runtime, [{"id": "x"}])
    claim(runtime, run_two, "x")
    runtime.machine.fail(run_two, "x", 1, ERROR, classification="poison")
    store = dead_letters(runtime)

    assert [letter.run_id for letter in store.find()] == [run_two, run_one]  # newest first
    assert [letter.node_id for letter in store.find(dlq_filter(run_one, None, None, None))] == ["b"]
    [poison] = store.find(dlq_filter(None, "function", "poison", None))
    assert poison.run_id == run_two
    stats = store.stats()
    assert stats.total == 2 and stats.by_classification == {"permanent": 1, "poison": 1}
    assert store.depth() == 2

    assert store.purge(poison.id) and not store.purge(poison.id)
    assert store.stats().total == 1
    with pytest.raises(DeadLetterError, match="no dead letter"):
        store.get(poison.id)
    with pytest.raises(DeadLetterError):
        store.get("not-an-id")
    assert not store.purge("not-an-id")
    with pytest.raises(InputError, match="classifications are transient, permanent"):
        dlq_filter(None, None, "sometimes", None)


@pytest.mark.subprocess
def test_the_dlq_commands_print_json_and_refuse_bad_input_in_one_line(
    runtime: Runtime, no_worker_settings: Settings, tmp_path: Path
) -> None:
    env = cli_env(no_worker_settings, tmp_path)
    assert json_out(dagwright("dlq", "list", "--json", env=env)) == []
    run_id = chain_failed_at_b(runtime)

    [listed] = json_out(dagwright("dlq", "list", "--json", "--class", "permanent", env=env))
    assert listed["run_id"] == run_id and "traceback" not in listed
    table = dagwright("dlq", "list", env=env)
    assert table.returncode == 0 and listed["id"] in table.stdout
    shown = dagwright("dlq", "show", listed["id"], env=env)
    assert "Traceback: ..." in shown.stdout and f"dlq replay {listed['id']}" in shown.stderr

    for args, message in (
        (["dlq", "list", "--class", "sometimes"], "unknown classification"),
        (["dlq", "show", "1-1"], "no dead letter"),
        (["dlq", "replay"], "say which"),
        (["dlq", "replay", listed["id"], "--all"], "not both"),
        (["dlq", "replay", "--filter", "colour=red"], "expected KEY=VALUE"),
        (["dlq", "purge", "--all"], "add --yes"),
    ):
        refused = dagwright(*args, env=env)
        assert refused.returncode == 2 and message in one_error_line(refused), refused.stderr

    replayed = json_out(dagwright("dlq", "replay", "--filter", f"run={run_id}", "--json", env=env))
    assert [(r["id"], r["replayed"], r["reopened"]) for r in replayed] == [
        (listed["id"], True, True)
    ]
    assert json_out(dagwright("dlq", "stats", "--json", env=env))["by_status"] == {"replayed": 1}
    purged = json_out(dagwright("dlq", "purge", "--all", "--yes", "--json", env=env))
    assert purged == {"purged": 1}
    assert json_out(dagwright("dlq", "list", "--json", env=env)) == []


def test_final_failures_are_classified_by_what_fixes_them() -> None:
    from dagwright.dlq import classify
    from dagwright.errors import (
        BudgetExceededError,
        LLMUnavailableError,
        PermanentError,
        PoisonMessageError,
        ToolPolicyError,
    )

    assert classify(PoisonMessageError("x"), retryable=True) == Classification.POISON
    assert classify(BudgetExceededError("x"), retryable=False) == Classification.BUDGET
    assert classify(ToolPolicyError("x"), retryable=False) == Classification.POLICY
    assert classify(LLMUnavailableError("x"), retryable=True) == Classification.TRANSIENT
    assert classify(PermanentError("x"), retryable=False) == Classification.PERMANENT
