"""A mapped node's spawn on the Lua state machine, driven directly (no Celery): one fenced
step, so a duplicate or superseded message spawns nothing more, and a worker that dies
before the step spawned nothing (its node is claimed again and spawns once)."""

from __future__ import annotations

import pytest

from dagwright.models import Node
from dagwright.orchestrator.runstate.machine import Claim
from dagwright.orchestrator.runtime import Runtime
from dagwright.plans.mapping import children_of
from dagwright.settings import Settings
from tests.support.runstate import claim, finish, start
from tests.support.waiting import wait_until


@pytest.fixture
def runtime(no_worker_settings: Settings) -> Runtime:
    return Runtime.from_settings(no_worker_settings)


def mapped_run(runtime: Runtime) -> tuple[str, Node]:
    """find (succeeded, 3 items) -> each (mapped), claimed under fence 1."""
    run_id, _ = start(
        runtime,
        [
            {"id": "find"},
            {"id": "each", "depends_on": ["find"], "map": {"over": "find"}},
        ],
    )
    finish(runtime, run_id, "find", output='["a", "b", "c"]')
    claimed = claim(runtime, run_id, "each")
    assert isinstance(claimed, Claim)
    return run_id, claimed.node


def test_a_second_spawn_under_the_same_fence_is_stale_and_adds_nothing(runtime: Runtime) -> None:
    run_id, node = mapped_run(runtime)
    children = children_of(node, ["a", "b", "c"])
    first = runtime.machine.spawn(run_id, "each", 1, children, "find")
    assert first is not None
    assert [ready.node_id for ready in first.ready] == ["each[0]", "each[1]", "each[2]"]
    assert runtime.machine.spawn(run_id, "each", 1, children, "find") is None
    assert claim(runtime, run_id, "each") is None  # the old message: its node is pending
    state = runtime.store.read_state(run_id)
    assert state.counts.total == 5
    assert state.nodes["each"].status.value == "pending"


def test_the_join_is_queued_once_every_child_succeeded(runtime: Runtime) -> None:
    run_id, node = mapped_run(runtime)
    runtime.machine.spawn(run_id, "each", 1, children_of(node, ["a", "b", "c"]), "find")
    for index in (2, 0):
        advance = finish(runtime, run_id, f"each[{index}]", output=f'"{index}"')
        assert advance.ready == []
    last = finish(runtime, run_id, "each[1]", output='"1"')
    [join] = last.ready
    assert (join.node_id, join.fence) == ("each", 2)
    joined = claim(runtime, run_id, "each", fence=2)
    assert isinstance(joined, Claim)
    assert list(joined.inputs) == ["each[0]", "each[1]", "each[2]"]


def test_a_worker_dead_before_its_spawn_leaves_one_spawn_to_its_successor(
    runtime: Runtime,
) -> None:
    run_id, _ = start(
        runtime,
        [{"id": "find"}, {"id": "each", "depends_on": ["find"], "map": {"over": "find"}}],
    )
    finish(runtime, run_id, "find", output='["a", "b"]')
    dead = claim(runtime, run_id, "each", lease_s=0.05)  # its worker dies before spawning
    assert isinstance(dead, Claim)
    children = children_of(dead.node, ["a", "b"])

    def requeued() -> bool:
        found = runtime.machine.reconcile_run(run_id, publish_grace_s=60, stranded_after_s=60)
        return bool(found.requeued)

    wait_until(requeued, timeout=10, what="the map's lease to expire")
    assert isinstance(claim(runtime, run_id, "each", fence=2), Claim)
    assert runtime.machine.spawn(run_id, "each", 1, children, "find") is None  # the dead one's
    assert runtime.machine.spawn(run_id, "each", 2, children, "find") is not None
    assert runtime.store.read_state(run_id).counts.total == 4


def test_an_item_that_makes_no_valid_node_fails_the_map_naming_it() -> None:
    from dagwright.errors import PermanentError

    node = Node.model_validate(
        {
            "id": "each",
            "type": "function",
            "function": "noop",
            "depends_on": ["find"],
            "params": {"value": "{{ item }}"},
            "map": {"over": "find"},
        }
    )
    deep: object = "bottom"
    for _ in range(40):
        deep = [deep]
    with pytest.raises(PermanentError, match=r"item 1 makes no valid node: .*nested 4"):
        children_of(node, ["fine", deep])
