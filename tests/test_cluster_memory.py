"""The memory tool with its state on a real 3-primary Valkey Cluster (decision 116).

A node's write names the run's slot and the namespace's, so on a Cluster it is steps:
the node checked in the run's slot, the namespace written in its own under the highest
fence each node showed there, the record copied back to the run. Here: the store's suites
written for one Valkey run unchanged on the cluster (this module's ``settings`` and
``redis_client`` are the cluster's), an agent writes and reads its memory through a real
worker, a zombie's write is refused, and a worker that died between the namespace's step
and the copy does not write twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.connection import connect
from dagwright.errors import NodeLostError
from dagwright.keys import Keys
from dagwright.memory.store import CallRef, MemoryStore, NodeMemory
from dagwright.testing import FakeAnthropicServer
from tests.support.functions import ARCHIVIST
from tests.support.llm_script import call as model_call
from tests.support.llm_script import text, turn
from tests.support.processes import Workers
from tests.test_memory_store import (  # noqa: F401
    FENCE,
    NODE,
    RUN,
    call,
    cmd,
    memory,
    test_a_namespace_expires_after_its_retention,
    test_a_read_only_namespace_refuses_writes_and_allows_views,
    test_a_secret_is_masked_before_it_is_stored,
    test_a_worker_that_lost_its_node_writes_nothing,
    test_a_write_is_applied_once_per_call,
    test_a_write_past_a_limit_is_refused_and_nothing_is_written,
    test_the_six_commands_answer_with_the_documented_texts,
)


@pytest.fixture
def settings(cluster_settings: Settings) -> Settings:
    """The imported store suites' settings: state on the cluster."""
    return cluster_settings


@pytest.fixture
def redis_client(cluster_settings: Settings) -> redis.Redis:
    """The imported store suites' client: the cluster's (emptied by ``cluster_settings``)."""
    return connect(cluster_settings.redis.url or "", cluster_settings.redis)


@pytest.fixture
def store(settings: Settings, redis_client: redis.Redis) -> MemoryStore:
    """The store of the imported suites (as theirs), on the cluster: node NODE of run RUN
    runs under FENCE."""
    keys = Keys(settings.redis.key_prefix)
    redis_client.hset(keys.run_key(RUN, "state"), NODE, "running")
    redis_client.hset(keys.run_key(RUN, "fence"), NODE, str(FENCE))
    return MemoryStore(redis_client, keys, settings)


@pytest.fixture
def subprocess_settings(cluster_settings: Settings) -> Settings:
    """The imported worker suites' settings, on the cluster."""
    return cluster_settings


def taken_over_after_the_check(zombie: MemoryStore, owner_reads: Callable[[], Any]) -> None:
    """Between the zombie's check in the run's slot and its write in the namespace's, its
    lease expires (the node is queued again under a new fence) and the new owner reads
    the namespace: the race the namespace's writers hash guards."""
    check = zombie._steps["check_node"]

    def check_then_lose_the_node(**kwargs: Any) -> Any:
        reply = check(**kwargs)
        zombie.client.hset(zombie.keys.run_key(RUN, "fence"), NODE, str(FENCE + 1))
        owner_reads()
        return reply

    zombie._steps["check_node"] = check_then_lose_the_node


def test_a_zombie_checked_before_the_takeover_cannot_write_once_the_owner_read(
    store: MemoryStore, redis_client: redis.Redis
) -> None:
    memory(store).run(cmd(command="create", path="/memories/a", file_text="1"), call("w"))
    owner = NodeMemory(store, "team", read_only=False)
    successor = CallRef(RUN, NODE, FENCE + 1, "o")
    zombie_store = MemoryStore(redis_client, store.keys, store.settings)
    taken_over_after_the_check(
        zombie_store, lambda: owner.run(cmd(command="view", path="/memories/a"), successor)
    )
    zombie_write = cmd(command="create", path="/memories/z", file_text="zombie")
    with pytest.raises(NodeLostError):
        NodeMemory(zombie_store, "team", read_only=False).run(zombie_write, call("z"))
    assert store.snapshot("team").files == {"/memories/a": "1"}
    assert redis_client.hget(store.keys.memory_meta("team"), "version") == "1"
    # The zombie's own read is refused too, and the owner writes on.
    with pytest.raises(NodeLostError):
        memory(store).run(cmd(command="view", path="/memories/a"), call("v"))
    owner.run(cmd(command="create", path="/memories/b", file_text="2"), successor)
    assert sorted(store.snapshot("team").files) == ["/memories/a", "/memories/b"]


def test_a_write_whose_record_never_reached_the_run_is_answered_not_applied_again(
    store: MemoryStore, redis_client: redis.Redis
) -> None:
    """A worker killed between the namespace's step and the copy of the record to the run:
    the resumed node's same call finds the record in the namespace's writers hash."""
    mem = memory(store)
    mem.run(cmd(command="create", path="/memories/log", file_text="1\n"), call("c"))
    insert = cmd(command="insert", path="/memories/log", insert_line=1, insert_text="2")
    first = mem.run(insert, call("i"))
    redis_client.hdel(store.keys.memory_writes(RUN), f"{NODE}/i")  # as if never copied
    assert mem.run(insert, call("i")) == first
    assert store.snapshot("team").files["/memories/log"] == "1\n2\n"
    assert redis_client.hget(store.keys.memory_meta("team"), "version") == "2"
    assert set(store.writes_of_run(RUN)) == {f"{NODE}/c", f"{NODE}/i"}  # copied again


def test_an_agent_writes_and_reads_its_memory_through_a_real_worker_on_the_cluster(
    cluster_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        turn(ARCHIVIST, 1, model_call("memory", command="view", path="/memories")),
        turn(
            ARCHIVIST,
            3,
            model_call("memory", command="create", path="/memories/seen.md", file_text="- 1\n"),
        ),
        turn(ARCHIVIST, 5, model_call("memory", command="view", path="/memories/seen.md")),
        turn(ARCHIVIST, 7, text("noted")),
    )
    workers.start(cluster_settings)
    client = Client(cluster_settings)
    plan = PlanBuilder()
    plan.agent("keep", "archivist", "Keep the notes.")
    run = client.submit(plan.build())
    state = run.wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, workers.log_tails()

    results = [
        block
        for request in fake_llm.requests[1:4]
        for block in request.body["messages"][-1]["content"]
        if block.get("type") == "tool_result"
    ]
    assert not any(result["is_error"] for result in results), results
    assert "File created successfully at: /memories/seen.md" in results[1]["content"]
    assert "     1\t- 1" in results[2]["content"]
    keys = Keys(cluster_settings.redis.key_prefix)
    namespace = f"run:{run.run_id}"
    state_client = client.runtime.client
    assert state_client.hgetall(keys.memory_files(namespace)) == {"/memories/seen.md": "- 1\n"}
    assert state_client.hget(keys.memory_writers(namespace), f"fence:{run.run_id}/keep")
    listed = MemoryStore(state_client, keys, cluster_settings).namespaces()
    assert [info.name for info in listed] == [namespace]
