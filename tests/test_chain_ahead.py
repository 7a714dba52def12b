"""Chains run ahead (decision 128): a worker runs a chain's next links before the success
of the one before is recorded, and records them together; a link that does not succeed
is claimed and recorded as any node; nothing is recorded for a link that no longer holds."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.keys import QUEUE_PREFIX
from dagwright.orchestrator.control.cancellation import cancel_run
from dagwright.orchestrator.control.dead_letter_replay import dead_letters
from dagwright.orchestrator.execution import attempt
from dagwright.orchestrator.execution.attempt import ExecutionEnv, Outcome, execute_node
from dagwright.orchestrator.execution.eager import EagerSlot
from dagwright.orchestrator.execution.fairness import WaitingMessages
from dagwright.orchestrator.runstate.machine import AHEAD_FENCE, Claim, LeaseRef, RunOn, Success
from dagwright.settings import Settings
from tests.support.functions import executions_key, release_key
from tests.support.processes import Workers
from tests.support.round_trips import counting_round_trips
from tests.support.runstate import claim, start
from tests.support.waiting import wait_until

QUEUE = f"{QUEUE_PREFIX}function"
HOLDER = "host:1"


def start_own(runtime: Any, nodes: list[dict[str, Any]]) -> tuple[str, list[str]]:
    return start(runtime, nodes, own_functions=True)


def batching_slot() -> EagerSlot:
    """A slot that takes up to 16 nodes a step within a generous window."""
    return EagerSlot(frozenset({QUEUE}), time.monotonic() + 24 * 3600, window_s=10.0, max_batch=16)


def chain(*specs: dict[str, Any]) -> list[dict[str, Any]]:
    """Nodes n0, n1... in a line, each with its ``specs`` entry's fields."""
    nodes = []
    for i, spec in enumerate(specs):
        nodes.append({"id": f"n{i}", **({"depends_on": [f"n{i - 1}"]} if i else {}), **spec})
    return nodes


ECHO = {"function": "echo_inputs"}


def run_on(batch: int = 16) -> RunOn:
    return RunOn(HOLDER, lease_s=30, max_time_limit_s=3600, batch=batch, links=True)


def test_a_chain_runs_ahead_and_is_recorded_in_one_step_for_its_links(
    worker_env: ExecutionEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    warm_up, _ = start_own(worker_env.runtime, chain(ECHO))  # scripts load, connections open
    assert execute_node(worker_env, warm_up, "n0", 1) == Outcome.SUCCEEDED
    worker_env.broker.next_task_ids([QUEUE], 1)
    run_id, _ = start_own(worker_env.runtime, chain(*[ECHO] * 6))
    worker_env.waiting = WaitingMessages(worker_env.broker, clock=lambda: 0.0)
    with counting_round_trips(monkeypatch) as sent:
        assert execute_node(worker_env, run_id, "n0", 1, batching_slot()) == Outcome.SUCCEEDED
    state = worker_env.runtime.store.read_state(run_id)
    assert state.status == RunStatus.SUCCEEDED
    # each link's input was the output of the one before it, run ahead or not
    assert state.nodes["n5"].output == {"n4": {"n3": {"n2": {"n1": {"n0": {}}}}}}
    assert all(node.attempts == 1 and node.started_at for node in state.nodes.values())
    # n0 alone (no pace seen yet), then n1 claimed with its success, its links n2..n5
    # with it, all five recorded in one step
    assert sent.count("FCALL") == 3, sent
    events = worker_env.runtime.store.read_events(run_id)
    running = [e for e in events if e.kind == "node.running"]
    assert [e.node for e in running] == [f"n{i}" for i in range(6)]
    assert [e.node for e in running if e.data.get("ahead")] == ["n2", "n3", "n4", "n5"]
    assert {e.data["holder"] for e in running} == {worker_env.holder}
    kinds = [(e.kind, e.node) for e in events if e.node in ("n1", "n2")]
    assert kinds[-3:] == [
        ("node.succeeded", "n1"),
        ("node.running", "n2"),
        ("node.succeeded", "n2"),
    ]


def test_a_link_that_fails_is_claimed_and_retried_as_any_node(worker_env: ExecutionEnv) -> None:
    flaky = {"function": "flaky", "params": {"fail_times": 1}}
    run_id, _ = start_own(worker_env.runtime, chain(ECHO, ECHO, ECHO, flaky, ECHO))
    assert execute_node(worker_env, run_id, "n0", 1, batching_slot()) == Outcome.SUCCEEDED
    state = worker_env.runtime.store.read_state(run_id)
    statuses = {node_id: node.status.value for node_id, node in state.nodes.items()}
    assert statuses == {
        "n0": "succeeded",
        "n1": "succeeded",
        "n2": "succeeded",
        "n3": "retry_wait",
        "n4": "pending",
    }
    failed = state.nodes["n3"]
    assert failed.attempts == 1
    assert failed.error is not None and "attempt 1 fails on purpose" in failed.error.message
    # claimed by the step that recorded the links before it (never queued), then retried
    events = [e for e in worker_env.runtime.store.read_events(run_id) if e.node == "n3"]
    assert [e.kind for e in events] == ["node.running", "node.retrying"]
    assert "ahead" not in events[0].data


def test_a_link_that_fails_for_good_blocks_the_rest_and_is_dead_lettered(
    worker_env: ExecutionEnv,
) -> None:
    broken = {"function": "flaky", "params": {"fail_times": 1, "permanent": True}}
    run_id, _ = start_own(worker_env.runtime, chain(ECHO, ECHO, broken, ECHO))
    execute_node(worker_env, run_id, "n0", 1, batching_slot())
    state = worker_env.runtime.store.read_state(run_id)
    assert state.status == RunStatus.FAILED
    assert state.nodes["n2"].status.value == "failed"
    assert state.nodes["n3"].status.value == "blocked"
    letters = dead_letters(worker_env.runtime).find()
    assert [(letter.run_id, letter.node_id) for letter in letters] == [(run_id, "n2")]


def test_a_link_past_its_timeout_is_recorded_as_timed_out(worker_env: ExecutionEnv) -> None:
    slow = {
        "function": "held_until_released",
        "timeout_s": 0.3,
        "retry": {"max_attempts": 1},
    }
    run_id, _ = start_own(worker_env.runtime, chain(ECHO, ECHO, slow))
    execute_node(worker_env, run_id, "n0", 1, batching_slot())
    state = worker_env.runtime.store.read_state(run_id)
    timed_out = state.nodes["n2"]
    assert timed_out.status.value == "failed"
    assert timed_out.error is not None and timed_out.error.error_class == "NodeTimeoutError"
    assert state.nodes["n1"].status.value == "succeeded"


def test_a_prefork_worker_runs_a_long_chain_ahead_each_node_once(
    subprocess_settings: Settings, workers: Workers
) -> None:
    # a window a loaded machine's pace fits in many times: the batches are full
    settings = subprocess_settings.model_copy(update={"batch_window_s": 1.0})
    workers.start(settings)
    client = Client(settings)
    plan = PlanBuilder("chain")
    previous: list[str] = []
    for i in range(40):
        previous = [plan.function(f"n{i}", "count", depends_on=previous)]
    handle = client.submit(plan.build())
    assert handle.wait(timeout=60).status == RunStatus.SUCCEEDED, workers.log_tails()
    executions = client.runtime.client.hgetall(executions_key(handle.run_id))
    assert executions == {f"n{i}": "1" for i in range(40)}
    running = [e for e in handle.events(follow=False) if e.kind == "node.running"]
    assert len(running) == 40
    # n0 alone, then 16 a step: n1 and 15 links, n17 and 15, n33 and 6
    assert sum(1 for e in running if e.data.get("ahead")) >= 30


def claimed_alone(worker_env: ExecutionEnv, run_id: str) -> Claim:
    """Record n0's success with a worker that runs on: n1 is claimed for it in the step."""
    runtime = worker_env.runtime
    assert isinstance(claim(runtime, run_id, "n0"), Claim)
    advance = runtime.machine.complete_many(
        run_id, [Success("n0", 1, "null")], pull_from=[QUEUE], run_on=run_on()
    )
    assert advance is not None and [row.node_id for row, _ in advance.claimed] == ["n1"]
    return advance.claimed[0][1]


def test_links_end_where_a_node_waits_on_more_than_its_dependency(
    worker_env: ExecutionEnv,
) -> None:
    nodes = chain(ECHO, ECHO, ECHO, {"run_if": "all_done", **ECHO}, ECHO)
    run_id, _ = start_own(worker_env.runtime, nodes)
    assert [link.node.id for link in claimed_alone(worker_env, run_id).ahead] == ["n2"]
    nodes = chain(ECHO, ECHO, ECHO, {"countdown_s": 5, **ECHO})
    run_id, _ = start_own(worker_env.runtime, nodes)
    assert [link.node.id for link in claimed_alone(worker_env, run_id).ahead] == ["n2"]
    joined = chain(ECHO, ECHO, ECHO, ECHO)
    joined[3]["depends_on"] = ["n2", "n0"]
    run_id, _ = start_own(worker_env.runtime, joined)
    assert [link.node.id for link in claimed_alone(worker_env, run_id).ahead] == ["n2"]


def test_a_link_no_longer_linked_is_not_recorded_and_its_dependency_settles_as_usual(
    worker_env: ExecutionEnv,
) -> None:
    """n1 gained a second dependent (as a planner's node may) after n2 was handed out as
    its link: n2's success is dropped, and n1's success readies both as usual."""
    runtime = worker_env.runtime
    run_id, _ = start_own(runtime, [*chain(ECHO, ECHO, ECHO), {"id": "x", "depends_on": ["n1"]}])
    assert isinstance(claim(runtime, run_id, "n0"), Claim)
    advance = runtime.machine.complete_many(run_id, [Success("n0", 1, "null")])
    assert advance is not None
    fence = next(node.fence for node in advance.ready if node.node_id == "n1")
    assert isinstance(claim(runtime, run_id, "n1", fence), Claim)
    successes = [Success("n1", fence, "1"), Success("n2", AHEAD_FENCE, "2")]
    advance = runtime.machine.complete_many(run_id, successes)
    assert advance is not None and advance.stale == {"n2"}
    assert sorted(node.node_id for node in advance.ready) == ["n2", "x"]
    state = runtime.store.read_state(run_id)
    assert state.nodes["n1"].status.value == "succeeded"
    assert state.nodes["n2"].status.value == "queued" and state.nodes["n2"].output is None


def test_a_link_is_recorded_only_after_its_dependency_is(worker_env: ExecutionEnv) -> None:
    runtime = worker_env.runtime
    run_id, _ = start_own(runtime, chain(ECHO, ECHO))
    assert isinstance(claim(runtime, run_id, "n0"), Claim)
    stale_first = [Success("n0", 7, "null"), Success("n1", AHEAD_FENCE, "1")]
    assert runtime.machine.complete_many(run_id, stale_first) is None
    alone = [Success("n1", AHEAD_FENCE, "1")]  # no success before it in the step
    assert runtime.machine.complete_many(run_id, alone) is None
    state = runtime.store.read_state(run_id)
    assert (state.nodes["n0"].status.value, state.nodes["n1"].status.value) == (
        "running",
        "pending",
    )


def test_a_worker_lost_while_running_ahead_loses_nothing(
    worker_env: ExecutionEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker dies running n3 ahead: n1's and n2's successes, held, were never
    recorded. n1 keeps its lease until it runs out; the reconciler then queues n1 again,
    and n2 and n3 are still pending: they run after it, as if nothing had run."""
    run_id, _ = start_own(worker_env.runtime, chain(*[ECHO] * 5))
    run_worker = attempt.run_worker

    def dies_at_n3(runtime: Any, ctx: Any, node: Any) -> Any:
        if node.id == "n3":
            raise SystemExit("killed")
        return run_worker(runtime, ctx, node)

    monkeypatch.setattr(attempt, "run_worker", dies_at_n3)
    with pytest.raises(SystemExit):
        execute_node(worker_env, run_id, "n0", 1, batching_slot())
    state = worker_env.runtime.store.read_state(run_id)
    statuses = [state.nodes[f"n{i}"].status.value for i in range(5)]
    assert statuses == ["succeeded", "running", "pending", "pending", "pending"]
    assert worker_env.leases.holding() == []  # let go: nobody renews n1's lease
    runtime = worker_env.runtime
    fence = int(runtime.store.client.hget(runtime.keys.run_key(run_id, "fence"), "n1"))
    # the lease runs out (renewed to 1 ms, as if its holder stopped renewing long ago)
    assert runtime.machine.renew([LeaseRef(run_id, "n1", fence)], 0.001) == [True]
    time.sleep(0.01)
    found = runtime.machine.reconcile_run(run_id, publish_grace_s=60, stranded_after_s=60)
    assert [node.node_id for node in found.requeued] == ["n1"]
    state = runtime.store.read_state(run_id)
    assert [state.nodes[f"n{i}"].output for i in range(5)] == [{}, None, None, None, None]


def test_a_link_still_running_when_the_held_successes_are_due_is_claimed_and_shown(
    worker_env: ExecutionEnv, caplog: pytest.LogCaptureFixture
) -> None:
    """n2 runs ahead past the batch's window: the lease keeper records n0..n1 and claims
    n2 meanwhile, so `status` shows it running (and n1 done) while it runs; it ends as
    any claimed node."""
    caplog.set_level("INFO", logger=attempt.__name__)
    held = {"function": "held_until_released", "params": {"seconds": 20}}
    runtime = worker_env.runtime
    run_id, _ = start_own(runtime, chain(ECHO, ECHO, held, ECHO))
    slot = EagerSlot(frozenset({QUEUE}), time.monotonic() + 24 * 3600, window_s=0.2, max_batch=16)
    outcome: list[Outcome] = []
    worker = threading.Thread(
        target=lambda: outcome.append(execute_node(worker_env, run_id, "n0", 1, slot))
    )
    worker.start()
    try:
        wait_until(
            lambda: runtime.store.read_state(run_id).nodes["n2"].status.value == "running",
            timeout=10,
            what="n2 shown running",
        )
        state = runtime.store.read_state(run_id)
        assert state.nodes["n1"].status.value == "succeeded"
    finally:
        runtime.store.client.set(release_key(run_id), 1)
        worker.join(timeout=30)
    assert outcome == [Outcome.SUCCEEDED]
    state = runtime.store.read_state(run_id)
    assert state.status == RunStatus.SUCCEEDED
    assert state.nodes["n2"].attempts == 1 and state.nodes["n2"].output == "released"
    running = [e for e in runtime.store.read_events(run_id) if e.kind == "node.running"]
    assert [e.node for e in running if e.data.get("ahead")] == []  # n2 claimed, n3 after it
    assert f"{run_id}/n2, run ahead, is claimed while it runs" in caplog.text


def test_a_link_waiting_on_a_slot_is_claimed_first_and_no_links_are_asked_again(
    worker_env: ExecutionEnv,
) -> None:
    """n2 takes a concurrency slot, which only a claimed node may: the worker runs none of
    the links ahead, and asks for none again while it serves this message."""
    limited = {"concurrency": {"key": "one-at-a-time", "limit": 1}, **ECHO}
    run_id, _ = start_own(worker_env.runtime, chain(ECHO, ECHO, limited, ECHO, ECHO))
    slot = batching_slot()
    assert execute_node(worker_env, run_id, "n0", 1, slot) == Outcome.SUCCEEDED
    assert worker_env.runtime.store.read_state(run_id).status == RunStatus.SUCCEEDED
    events = worker_env.runtime.store.read_events(run_id)
    assert [e.node for e in events if e.kind == "node.running" and e.data.get("ahead")] == []
    assert not slot.asks_links(run_id) and slot.asks_links("another run")


def test_a_link_that_writes_under_its_claim_is_claimed_first(
    worker_env: ExecutionEnv, caplog: pytest.LogCaptureFixture
) -> None:
    """A checkpoint is fenced by the node's claim: n2, run ahead, is claimed before it
    saves one, and goes on under that claim."""
    caplog.set_level("INFO", logger=attempt.__name__)
    run_id, _ = start_own(worker_env.runtime, chain(ECHO, ECHO, {"function": "checkpointed"}, ECHO))
    assert execute_node(worker_env, run_id, "n0", 1, batching_slot()) == Outcome.SUCCEEDED
    state = worker_env.runtime.store.read_state(run_id)
    assert state.status == RunStatus.SUCCEEDED
    assert state.nodes["n2"].attempts == 1 and state.nodes["n2"].error is None
    assert state.nodes["n2"].output >= 1  # the fence of its claim, not a link's 0
    running = [e for e in worker_env.runtime.store.read_events(run_id) if e.kind == "node.running"]
    assert [e.node for e in running if e.data.get("ahead")] == []  # n2 claimed, n3 after it
    assert f"{run_id}/n2, run ahead, is claimed while it runs" in caplog.text


def test_a_run_cancelled_while_a_link_runs_ahead_records_nothing_after_the_cancel(
    worker_env: ExecutionEnv,
) -> None:
    """The cancel stops the link (its run's stop reaches it as any node's) and nothing it
    or the nodes held before it did is recorded: they are all cancelled."""
    held = {"function": "held_until_released", "params": {"seconds": 20}}
    runtime = worker_env.runtime
    run_id, _ = start_own(runtime, chain(ECHO, ECHO, held, ECHO))
    outcome: list[Outcome] = []
    worker = threading.Thread(
        target=lambda: outcome.append(execute_node(worker_env, run_id, "n0", 1, batching_slot()))
    )
    worker.start()
    try:
        wait_until(
            lambda: LeaseRef(run_id, "n2", AHEAD_FENCE) in worker_env.leases.holding(),
            timeout=10,
            what="n2 running ahead",
        )
        cancel_run(runtime, worker_env.broker, run_id, "changed my mind")
    finally:
        worker.join(timeout=30)
    assert outcome == [Outcome.SUCCEEDED]  # n0's, recorded before the cancel
    state = runtime.store.read_state(run_id)
    assert state.status == RunStatus.CANCELLED
    statuses = [state.nodes[f"n{i}"].status.value for i in range(4)]
    assert statuses == ["succeeded", "cancelled", "cancelled", "cancelled"]
    assert [state.nodes[f"n{i}"].output for i in range(1, 4)] == [None, None, None]
    assert worker_env.leases.holding() == []
