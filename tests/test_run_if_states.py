"""Trigger rules (a node's ``run_if``) on the Lua state machine of a real Valkey, driven by
hand (no Celery): what each rule queues, blocks and skips, a handler's inputs, replays,
cancels and re-plans, and properties over random DAGs checked against a model."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagwright.dlq import DeadLetterFilter
from dagwright.models import ErrorInfo, RunStatus
from dagwright.orchestrator.control.dead_letter_replay import dead_letters
from dagwright.orchestrator.runstate.machine import Claim, Replayed, ReplayRefused
from dagwright.orchestrator.runtime import Runtime
from dagwright.settings import Settings
from tests.support.runstate import claim, finish, kinds, start

ERROR = ErrorInfo(error_class="Boom", message="boom", retryable=False, traceback="secret tb")
RULES = ("all_succeeded", "all_done", "any_failed", "none_failed", "one_success", "always")


@pytest.fixture
def runtime(no_worker_settings: Settings) -> Runtime:
    return Runtime.from_settings(no_worker_settings)


def fail(runtime: Runtime, run_id: str, node: str, fence: int = 1) -> Any:
    assert isinstance(claim(runtime, run_id, node, fence), Claim)
    return runtime.machine.fail(run_id, node, fence, ERROR)


def states(runtime: Runtime, run_id: str) -> dict[str, str]:
    return {nid: n.status.value for nid, n in runtime.store.read_state(run_id).nodes.items()}


def test_a_failure_queues_its_any_failed_handler_and_the_run_still_fails(
    runtime: Runtime,
) -> None:
    run_id, _ = start(
        runtime,
        [
            {"id": "work"},
            {"id": "after", "depends_on": ["work"]},
            {"id": "cleanup", "depends_on": ["work"], "run_if": "any_failed"},
        ],
    )
    advance = fail(runtime, run_id, "work")
    assert [n.node_id for n in advance.ready] == ["cleanup"] and advance.run_finished is None
    assert states(runtime, run_id)["after"] == "blocked"
    got = claim(runtime, run_id, "cleanup")
    assert isinstance(got, Claim)
    assert got.inputs == {
        "work": {"status": "failed", "error": {"error_class": "Boom", "message": "boom"}}
    }
    final = runtime.machine.complete(run_id, "cleanup", 1, '"cleaned"')
    assert final is not None and final.run_finished == RunStatus.FAILED
    state = runtime.store.read_state(run_id)
    assert state.nodes["cleanup"].output == "cleaned" and state.result is None
    assert (state.counts.failed, state.counts.blocked, state.counts.succeeded) == (1, 1, 1)


def test_an_any_failed_handler_is_skipped_when_all_succeed_and_so_is_what_needs_it(
    runtime: Runtime,
) -> None:
    run_id, _ = start(
        runtime,
        [
            {"id": "work"},
            {"id": "cleanup", "depends_on": ["work"], "run_if": "any_failed"},
            {"id": "notify", "depends_on": ["cleanup"]},
            {"id": "always", "depends_on": ["cleanup"], "run_if": "all_done"},
        ],
    )
    advance = finish(runtime, run_id, "work", output='"W"')
    assert [n.node_id for n in advance.ready] == ["always"]
    assert states(runtime, run_id) == {
        "work": "succeeded",
        "cleanup": "skipped",
        "notify": "skipped",
        "always": "queued",
    }
    got = claim(runtime, run_id, "always")
    assert isinstance(got, Claim) and got.inputs == {"cleanup": {"status": "skipped"}}
    assert runtime.machine.complete(run_id, "always", 1, "1").run_finished == RunStatus.SUCCEEDED
    state = runtime.store.read_state(run_id)
    assert state.result == "W"  # handlers and what follows them are not default outputs
    assert state.counts.skipped == 2 and state.counts.done == state.counts.total == 4
    assert ("node.skipped", "cleanup") in [
        (e.kind, e.node) for e in runtime.store.read_events(run_id)
    ]


def test_all_done_waits_for_every_dependency_and_sees_each_outcome(runtime: Runtime) -> None:
    run_id, _ = start(
        runtime,
        [
            {"id": "ok"},
            {"id": "bad"},
            {"id": "mid", "depends_on": ["bad"]},
            {"id": "report", "depends_on": ["ok", "mid", "bad"], "run_if": "all_done"},
        ],
    )
    assert fail(runtime, run_id, "bad").ready == []  # "ok" has not ended yet
    assert [n.node_id for n in finish(runtime, run_id, "ok", output='{"n": 1}').ready] == ["report"]
    got = claim(runtime, run_id, "report")
    assert isinstance(got, Claim)
    assert got.inputs == {
        "ok": {"status": "succeeded", "output": {"n": 1}},
        "mid": {"status": "blocked"},
        "bad": {"status": "failed", "error": {"error_class": "Boom", "message": "boom"}},
    }


def test_a_run_without_rules_writes_no_rule_keys(runtime: Runtime) -> None:
    run_id, _ = start(runtime, [{"id": "a"}, {"id": "b", "depends_on": ["a"]}])
    finish(runtime, run_id, "a")
    finish(runtime, run_id, "b")
    for name in ("run_if", "failed_deps", "skipped_deps"):
        assert not runtime.client.exists(runtime.keys.run_key(run_id, name))


def test_cancel_cancels_waiting_handlers_and_leaves_skipped_ones(runtime: Runtime) -> None:
    run_id, _ = start(
        runtime,
        [
            {"id": "a"},
            {"id": "b"},
            {"id": "skip_me", "depends_on": ["a"], "run_if": "any_failed"},
            {"id": "handler", "depends_on": ["b"], "run_if": "any_failed"},
        ],
    )
    finish(runtime, run_id, "a")
    runtime.machine.cancel(run_id, "test")
    assert states(runtime, run_id) == {
        "a": "succeeded",
        "b": "cancelled",
        "skip_me": "skipped",
        "handler": "cancelled",
    }


def failed_with_handler_done(runtime: Runtime) -> str:
    run_id, _ = start(
        runtime,
        [
            {"id": "work"},
            {"id": "after", "depends_on": ["work"]},
            {"id": "cleanup", "depends_on": ["work"], "run_if": "any_failed"},
            {"id": "notify", "depends_on": ["cleanup"]},
        ],
    )
    fail(runtime, run_id, "work")
    return run_id


def replay_newest(runtime: Runtime, run_id: str, node: str) -> Replayed | ReplayRefused:
    """Replay the newest dead letter of ``node``."""
    letters = dead_letters(runtime).find(DeadLetterFilter(run_id=run_id), limit=0)
    letter = next(letter for letter in letters if letter.node_id == node)
    return runtime.machine.replay(run_id, node, letter.fence, entry_id=letter.id)


def replay_work(runtime: Runtime, run_id: str) -> Replayed | ReplayRefused:
    return replay_newest(runtime, run_id, "work")


def test_a_replay_waits_for_the_handler_its_failure_started(runtime: Runtime) -> None:
    run_id = failed_with_handler_done(runtime)
    refused = replay_work(runtime, run_id)
    assert isinstance(refused, ReplayRefused) and "'cleanup' after it is queued" in refused.reason
    assert states(runtime, run_id)["work"] == "failed"  # nothing changed


def test_a_replay_reopens_the_handler_and_what_followed_it(runtime: Runtime) -> None:
    run_id = failed_with_handler_done(runtime)
    finish(runtime, run_id, "cleanup", output='"cleaned"')
    assert finish(runtime, run_id, "notify").run_finished == RunStatus.FAILED
    replayed = replay_work(runtime, run_id)
    assert isinstance(replayed, Replayed) and replayed.reopened
    assert states(runtime, run_id) == {
        "work": "queued",
        "after": "pending",
        "cleanup": "pending",
        "notify": "pending",
    }
    assert runtime.store.read_state(run_id).nodes["cleanup"].output is None
    advance = finish(runtime, run_id, "work", fence=2)
    assert [n.node_id for n in advance.ready] == ["after"]
    assert finish(runtime, run_id, "after").run_finished == RunStatus.SUCCEEDED
    state = runtime.store.read_state(run_id)
    assert (state.nodes["cleanup"].status.value, state.nodes["notify"].status.value) == (
        "skipped",
        "skipped",
    )
    assert (state.counts.failed, state.counts.skipped, state.counts.done) == (0, 2, 4)
    assert "node.reopened" in kinds(runtime, run_id, "cleanup")


def test_a_replay_recounts_a_run_failed_by_an_older_version(runtime: Runtime) -> None:
    """Before trigger rules, a failure did not count itself in the nodes it blocked: a
    replay counts every dependent again from its dependencies' states."""
    run_id, _ = start(runtime, [{"id": "a"}, {"id": "b"}, {"id": "c", "depends_on": ["a", "b"]}])
    finish(runtime, run_id, "b")
    fail(runtime, run_id, "a")
    runtime.client.hset(runtime.keys.run_key(run_id, "remaining"), "c", 1)  # as it was left
    runtime.client.delete(runtime.keys.run_key(run_id, "failed_deps"))
    assert isinstance(replay_newest(runtime, run_id, "a"), Replayed)
    assert [n.node_id for n in finish(runtime, run_id, "a", fence=2).ready] == ["c"]
    assert finish(runtime, run_id, "c").run_finished == RunStatus.SUCCEEDED


def test_a_planned_handler_of_a_node_that_failed_already_runs_at_once(runtime: Runtime) -> None:
    from dagwright.models import Node
    from dagwright.orchestrator.runstate.machine import Dispatch, NewNode

    run_id, _ = start(runtime, [{"id": "planner"}, {"id": "x"}])
    claim(runtime, run_id, "planner")
    fail(runtime, run_id, "x")

    def new(node_id: str, **fields: Any) -> NewNode:
        spec = Node(id=node_id, type="function", function="noop", depends_on=["x"], **fields)
        dispatch = Dispatch("dw.function", 60)
        return NewNode(node_id, spec.model_dump_json(exclude_defaults=True), ["x"], [], dispatch)

    advance = runtime.machine.expand(
        run_id,
        "planner",
        1,
        output_json="{}",
        new_nodes=[new("handler", run_if="any_failed"), new("needs_x")],
        output_nodes=None,
        replaced=[],
    )
    assert advance is not None and [n.node_id for n in advance.ready] == ["handler"]
    assert states(runtime, run_id)["needs_x"] == "blocked"
    got = claim(runtime, run_id, "handler")
    assert isinstance(got, Claim) and got.inputs["x"]["status"] == "failed"


def test_one_success_is_queued_at_the_first_success_and_sees_the_others_open(
    runtime: Runtime,
) -> None:
    run_id, _ = start(
        runtime,
        [
            {"id": "a"},
            {"id": "b"},
            {"id": "c"},
            {"id": "pick", "depends_on": ["a", "b", "c"], "run_if": "one_success"},
        ],
    )
    assert fail(runtime, run_id, "a").ready == []  # a failure does not decide it
    assert isinstance(claim(runtime, run_id, "b"), Claim)
    assert [n.node_id for n in finish(runtime, run_id, "c", output='"C"').ready] == ["pick"]
    got = claim(runtime, run_id, "pick")
    assert isinstance(got, Claim)
    assert got.inputs == {
        "a": {"status": "failed", "error": {"error_class": "Boom", "message": "boom"}},
        "b": {"status": "running"},
        "c": {"status": "succeeded", "output": "C"},
    }
    assert runtime.machine.complete(run_id, "pick", 1, "1").run_finished is None  # b runs
    assert runtime.machine.complete(run_id, "b", 1, "2").ready == []  # pick ran once
    assert runtime.store.read_state(run_id).status == RunStatus.FAILED  # a failed


def test_a_planned_one_success_node_after_a_success_runs_at_once(runtime: Runtime) -> None:
    from dagwright.models import Node
    from dagwright.orchestrator.runstate.machine import Dispatch, NewNode

    run_id, _ = start(runtime, [{"id": "planner"}, {"id": "x"}, {"id": "y"}])
    claim(runtime, run_id, "planner")
    finish(runtime, run_id, "x", output='"X"')
    spec = Node(
        id="pick", type="function", function="noop", depends_on=["x", "y"], run_if="one_success"
    )
    dispatch = Dispatch("dw.function", 60)
    advance = runtime.machine.expand(
        run_id,
        "planner",
        1,
        output_json="{}",
        new_nodes=[NewNode("pick", spec.model_dump_json(), ["x", "y"], [], dispatch)],
        output_nodes=None,
        replaced=[],
    )
    assert advance is not None and [n.node_id for n in advance.ready] == ["pick"]
    assert states(runtime, run_id)["y"] == "queued"


def test_a_handlers_claim_reply_decodes_by_name_whatever_the_order() -> None:
    from dagwright.models import Node

    spec = Node(id="h", type="function", function="noop", depends_on=["a", "b"], run_if="all_done")
    reply = [
        "errors", ["b", ERROR.model_dump_json()],
        "outcomes", ["a", "succeeded", "b", "failed"],
        "inputs", ["a", '{"x": 1}', "b", None],
        "status", "ok", "spec", spec.model_dump_json(), "attempt", 1, "checkpoint", "",
        "deaths", 0, "losses", 0,
        "max_concurrent_nodes", "", "response_cache", "", "run_inputs", "",
    ]  # fmt: skip
    claim = Claim.from_reply(reply)
    assert isinstance(claim, Claim) and claim.node.run_if == "all_done"
    assert claim.inputs == {
        "a": {"status": "succeeded", "output": {"x": 1}},
        "b": {"status": "failed", "error": {"error_class": "Boom", "message": "boom"}},
    }


# --- properties over random DAGs ---------------------------------------------------------


@st.composite
def rule_dags(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Up to 8 nodes, each depending on some earlier ones, with a rule if it has any."""
    nodes: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 8))):
        deps = (
            sorted(draw(st.sets(st.sampled_from([n["id"] for n in nodes]), max_size=3)))
            if nodes
            else []
        )
        node: dict[str, Any] = {"id": f"n{i}", "depends_on": deps}
        if deps:
            node["run_if"] = draw(st.sampled_from(RULES))
        nodes.append(node)
    return nodes


def expected_states(nodes: list[dict[str, Any]], fails: set[str]) -> dict[str, str]:
    """The model: each node's final state, in plan (a topological) order."""
    found: dict[str, str] = {}
    for node in nodes:
        outcomes = [found[dep] for dep in node["depends_on"]]
        failed = sum(o in ("failed", "blocked") for o in outcomes)
        skipped = outcomes.count("skipped")
        succeeded = outcomes.count("succeeded")
        rule = node.get("run_if", "all_succeeded")
        if rule == "all_succeeded" and (failed or skipped):
            found[node["id"]] = "blocked" if failed else "skipped"
        elif rule == "none_failed" and failed:
            found[node["id"]] = "blocked"
        elif rule == "one_success" and not succeeded:
            found[node["id"]] = "blocked" if failed else "skipped"
        elif rule == "any_failed" and not failed:
            found[node["id"]] = "skipped"
        else:
            found[node["id"]] = "failed" if node["id"] in fails else "succeeded"
    return found


def drive(
    runtime: Runtime,
    run_id: str,
    ready: list[tuple[str, int]],
    fails: set[str],
    data: st.DataObject,
) -> dict[str, int]:
    """Run the queued nodes in an order hypothesis picks, each failing if in ``fails``,
    until none is queued; returns how many times each node was claimed."""
    claims: dict[str, int] = {}
    while ready:
        node, fence = ready.pop(data.draw(st.integers(0, len(ready) - 1)))
        assert isinstance(claim(runtime, run_id, node, fence), Claim)
        claims[node] = claims.get(node, 0) + 1
        if node in fails:
            advance = runtime.machine.fail(run_id, node, fence, ERROR)
        else:
            advance = runtime.machine.complete(run_id, node, fence, "null")
        assert advance is not None
        ready += [(n.node_id, n.fence) for n in advance.ready]
    return claims


def assert_consistent(runtime: Runtime, run_id: str, expected: dict[str, str]) -> None:
    state = runtime.store.read_state(run_id)
    assert {nid: n.status.value for nid, n in state.nodes.items()} == expected
    counts = state.counts
    for name in ("succeeded", "failed", "blocked", "skipped"):
        assert getattr(counts, name) == list(expected.values()).count(name), name
    assert counts.done == counts.total and counts.running == 0
    bad = {"failed", "blocked"} & set(expected.values())
    assert state.status == (RunStatus.FAILED if bad else RunStatus.SUCCEEDED)
    remaining = runtime.client.hgetall(runtime.keys.run_key(run_id, "remaining"))
    assert set(remaining.values()) <= {"0"}  # every dependency counted once, and only once


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(nodes=rule_dags(), data=st.data())
def test_random_rule_dags_end_as_the_model_says_and_replays_agree(
    no_worker_settings: Settings, nodes: list[dict[str, Any]], data: st.DataObject
) -> None:
    runtime = Runtime.from_settings(no_worker_settings)
    fails = data.draw(st.sets(st.sampled_from([n["id"] for n in nodes])))
    run_id, roots = start(runtime, nodes)
    claims = drive(runtime, run_id, [(r, 1) for r in roots], fails, data)
    expected = expected_states(nodes, fails)
    assert claims == {nid: 1 for nid, s in expected.items() if s in ("succeeded", "failed")}
    assert_consistent(runtime, run_id, expected)

    # Replay the failed nodes one by one, each succeeding from then on: after each replay
    # the run ends as the model says of a run where that node had not failed.
    while failed := [nid for nid, s in states(runtime, run_id).items() if s == "failed"]:
        replayed = replay_newest(runtime, run_id, failed[0])
        assert isinstance(replayed, Replayed), replayed
        fails.discard(failed[0])
        ready = [(n.node_id, n.fence) for n in replayed.ready]
        drive(runtime, run_id, ready, fails, data)
        assert_consistent(runtime, run_id, expected_states(nodes, fails))


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(nodes=rule_dags(), data=st.data())
def test_a_cancel_at_any_step_leaves_every_node_final_and_counted(
    no_worker_settings: Settings, nodes: list[dict[str, Any]], data: st.DataObject
) -> None:
    runtime = Runtime.from_settings(no_worker_settings)
    fails = data.draw(st.sets(st.sampled_from([n["id"] for n in nodes])))
    run_id, roots = start(runtime, nodes)
    ready = [(r, 1) for r in roots]
    for _ in range(data.draw(st.integers(0, len(nodes)))):
        if not ready:
            break
        node, fence = ready.pop(0)
        claim(runtime, run_id, node, fence)
        if node in fails:
            advance = runtime.machine.fail(run_id, node, fence, ERROR)
        else:
            advance = runtime.machine.complete(run_id, node, fence, "null")
        ready += [(n.node_id, n.fence) for n in advance.ready]
    cancelled = runtime.machine.cancel(run_id, "test")
    # Its teardown nodes (run_if: always) still run, queued before the cancel or by it.
    teardown = cancelled.stopped.teardown if cancelled.stopped else []
    still_queued = [(n, f) for n, f in ready if states(runtime, run_id)[n] == "queued"]
    drive(runtime, run_id, still_queued + [(n.node_id, n.fence) for n in teardown], fails, data)
    state = runtime.store.read_state(run_id)
    if cancelled.outcome == "cancelled":  # else the run had ended before it
        assert state.status == RunStatus.CANCELLED
    assert all(n.status.is_final for n in state.nodes.values())
    always = [n["id"] for n in nodes if n.get("run_if") == "always"]
    assert all(state.nodes[nid].status in ("succeeded", "failed") for nid in always)
    shown = [n.status.value for n in state.nodes.values()]
    counts = state.counts
    for name in ("succeeded", "failed", "blocked", "skipped", "cancelled"):
        assert getattr(counts, name) == shown.count(name), name
    assert counts.done == counts.total == len(nodes) and counts.running == 0
    if state.status == RunStatus.CANCELLED:  # nothing runs after a cancel, handlers neither
        assert all(claim(runtime, run_id, node, fence) is None for node, fence in ready)
