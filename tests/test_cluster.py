"""State on a real 3-primary Valkey Cluster, the broker on a plain Valkey.

The session's cluster (``valkey_cluster``, tests/support/valkey_cluster.py) holds the run
state; Celery's broker stays on the session's Valkey (kombu has no cluster transport).
Besides the tests written here (the spine: DAGs through real workers), suites written for
one Valkey run here unchanged: they are imported, and this module's ``subprocess_settings``
and ``no_worker_settings`` give them the cluster instead (pytest resolves a test's
fixtures where it is collected). A script or MULTI naming keys of two slots fails them
with CROSSSLOT.
"""

from __future__ import annotations

import pytest
import redis

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.errors import ConfigurationError
from dagwright.metrics.readings import MetricsReader
from dagwright.models import Plan
from dagwright.orchestrator.execution.attempt import ExecutionEnv
from dagwright.orchestrator.execution.backlog import ReadyBacklog, read_pooled
from dagwright.orchestrator.execution.reconciler import Reconciler
from dagwright.orchestrator.runstate.machine import Claim
from dagwright.orchestrator.runstate.scripts import SETTLE_CHUNK
from dagwright.orchestrator.runtime import Runtime
from dagwright.registry import build_registry
from dagwright.tasks import build_app
from tests.support.functions import executions_key, overlap_key
from tests.support.processes import Workers
from tests.support.runstate import claim, start
from tests.support.valkey_cluster import ValkeyCluster
from tests.support.waiting import wait_until

# Suites that run on the cluster as written (each name is the test collected here too).
from tests.test_approvals import (  # noqa: F401
    test_a_node_waits_for_approval_with_its_worker_slot_free_then_runs_as_edited,
)
from tests.test_cancellation import (  # noqa: F401
    test_cancel_revokes_the_messages_of_queued_nodes_and_none_of_them_runs,
)
from tests.test_cluster_write_orders import (  # noqa: F401
    test_a_refused_fail_leaves_no_dead_letter_behind,
    test_a_run_whose_caller_died_before_writing_it_leaves_the_active_set,
    test_an_age_out_deletes_the_dead_letter_of_a_node_that_ended_between_its_steps,
    test_an_age_out_whose_caller_died_between_its_steps_is_finished_by_the_next_once,
    test_an_approval_indexed_before_its_node_waits_is_not_listed_nor_dropped,
    test_forget_keeps_a_run_open_again_in_the_active_set,
)
from tests.test_concurrency_keys import keyed_plan
from tests.test_dlq import (  # noqa: F401
    runtime,
    test_a_dead_letter_is_replayed_once_only,
    test_a_final_failure_writes_one_dead_letter_with_everything_needed_to_replay,
    test_replay_reopens_the_run_unblocks_dependents_and_keeps_completed_nodes,
)
from tests.test_ready_backlog import QUEUE, fan_out, pulling_slots, readied
from tests.test_recovery import (  # noqa: F401
    test_a_pool_process_killed_mid_node_is_recovered_at_once,
    test_a_whole_worker_killed_mid_node_is_recovered_by_lease_expiry,
)
from tests.test_resilience import (  # noqa: F401
    test_sigkill_chaos_loses_nothing_and_completes_every_node_once,
)
from tests.test_retention import (  # noqa: F401
    test_a_run_open_past_its_maximum_age_is_failed_visibly_and_replayable,
    test_a_run_still_planning_past_its_maximum_age_fails,
)
from tests.test_schedules import (  # noqa: F401
    test_overlap_skip_starts_no_second_run_while_one_runs,
    test_ticks_fired_at_once_start_one_run_under_overlap_skip,
)

RUNS = 24  # enough that every primary holds some (all on two of three: < 0.1%)


@pytest.fixture
def subprocess_settings(cluster_settings: Settings) -> Settings:
    """The imported suites' worker-subprocess settings, on the cluster."""
    return cluster_settings


@pytest.fixture(params=["redis"])
def broker(request: pytest.FixtureRequest) -> str:
    """The imported suites' broker: a plain Valkey only (the cluster holds the state; the
    RabbitMQ runs of those suites are on one Valkey's state, in their own modules)."""
    return str(request.param)


@pytest.fixture
def no_worker_settings(cluster_settings: Settings) -> Settings:
    """The imported suites' settings of tests driving the state machine by hand."""
    return cluster_settings


def diamond(index: int) -> PlanBuilder:
    plan = PlanBuilder(f"diamond {index}")
    plan.function("a", "count")
    plan.function("b", "count", depends_on=["a"])
    plan.function("c", "count", depends_on=["a"])
    plan.function("d", "count", depends_on=["b", "c"])
    return plan


def test_dags_of_many_runs_run_each_node_once_through_real_workers_on_the_cluster(
    cluster_settings: Settings, workers: Workers, valkey_cluster: ValkeyCluster
) -> None:
    workers.start(cluster_settings, concurrency=4)
    client = Client(cluster_settings)
    runs = [client.submit(diamond(index).build(output="d")) for index in range(RUNS)]
    for run in runs:
        state = run.wait(timeout=90)
        assert state.status == RunStatus.SUCCEEDED, workers.log_tails()
        assert state.result == "d"
        counts = client.runtime.client.hgetall(executions_key(run.run_id))
        assert counts == {"a": "1", "b": "1", "c": "1", "d": "1"}
    held = [node.dbsize() for node in valkey_cluster.node_clients()]
    assert all(size > 0 for size in held), held  # the runs spread over the three primaries
    assert {run.run_id for run in runs} <= set(client.runtime.store.list_runs(limit=RUNS))


def test_a_cluster_cannot_be_the_broker_and_says_what_to_set(
    cluster_settings: Settings,
) -> None:
    settings = cluster_settings.model_copy(update={"broker_url": None})
    with pytest.raises(ConfigurationError, match="set DAGWRIGHT_BROKER_URL to a plain Redis"):
        build_app(settings)


def test_a_script_naming_keys_of_two_slots_is_refused_by_the_cluster(
    cluster_settings: Settings,
) -> None:
    """What every test here guards against (so a pass means something)."""
    client = Client(cluster_settings).runtime.client
    script = client.register_script("return redis.call('EXISTS', KEYS[1], KEYS[2])")
    refusals = (redis.RedisError, redis.exceptions.RedisClusterException)
    with pytest.raises(refusals, match=r"same (key )?slot|CROSSSLOT"):
        script(keys=["dw:{run-a}:run", "dw:{run-b}:run"])


def test_runs_of_a_concurrency_key_take_its_places_in_turn_on_the_cluster(
    cluster_settings: Settings, workers: Workers
) -> None:
    """A key's places (its slot) and each run (its own) in two steps: gate_take.lua, admit.lua."""
    workers.start(cluster_settings, concurrency=4)
    client = Client(cluster_settings)
    plan = keyed_plan({"function": "overlap", "params": {"seconds": 0.3, "group": "acme"}})
    handles = [client.submit(plan, inputs={"customer": "acme"}) for _ in range(4)]
    for handle in handles:
        assert handle.wait(timeout=90).status == RunStatus.SUCCEEDED, workers.log_tails()
    assert client.runtime.client.hget(overlap_key("acme"), "max") == "2"
    kinds = [event.kind for handle in handles for event in handle.events(follow=False)]
    assert kinds.count("run.admitted") == 4


def patient_reconciler(env: ExecutionEnv) -> Reconciler:
    """A reconciler that publishes no pool for being idle (nobody pulls from these) within
    a busy machine's test: what it totals stays pooled."""
    settings = env.runtime.settings.model_copy(update={"publish_grace_s": 600.0})
    return Reconciler(Runtime.from_settings(settings), env.broker)


def test_pools_pulls_and_a_chunked_release_are_counted_per_run_and_totalled_by_bucket(
    worker_env: ExecutionEnv,
) -> None:
    """Every run script counts the run's pooled nodes in its own slot on a cluster
    (keys.run_pooled: else CROSSSLOT), as exactly as the one counter on one server; a
    reconciler's pass totals them by bucket, which the backlog's readers sum."""
    run_runtime, machine = worker_env.runtime, worker_env.runtime.machine
    client, keys = run_runtime.client, run_runtime.keys

    def of_run(run_id: str) -> dict[str, str]:
        return client.hgetall(keys.run_pooled(run_id))

    reconciler = patient_reconciler(worker_env)

    def totals() -> dict[str, int]:
        buckets = run_runtime.settings.dispatch.reconciler_buckets
        assert len(reconciler.run_once().buckets) == buckets  # the only reconciler: all
        return read_pooled(client, keys, buckets=buckets)

    first, _ = start(run_runtime, fan_out(20))
    assert machine.pool(first, readied(run_runtime, first)[:15]) == 15
    pulled = machine.pull(first, [QUEUE])
    assert len(pulled) == 1 and of_run(first) == {QUEUE: "14"}
    assert machine.pool(first, pulled) == 1 and of_run(first) == {QUEUE: "15"}
    chunked, _ = start(run_runtime, fan_out(SETTLE_CHUNK + 50))
    assert isinstance(claim(run_runtime, chunked, "root"), Claim)
    advance = machine.complete(chunked, "root", 1, "null")
    assert advance is not None and advance.settling and len(advance.ready) == SETTLE_CHUNK
    assert of_run(chunked) == {QUEUE: "50"}  # yet to be released: ready all the same
    assert totals() == {QUEUE: 15 + 50}
    released = machine.settle(chunked)
    assert released is not None and len(released.ready) == 50
    machine.cancel(first, "enough")
    assert of_run(first) == {} and of_run(chunked) == {}
    assert client.exists(keys.pooled_nodes) == 0  # no key of another slot written
    assert totals() == {}


def test_a_pulled_fan_out_reads_as_its_backlog_on_the_cluster_and_0_after_cancel(
    cluster_settings: Settings, workers: Workers
) -> None:
    """Issue 31's autoscaling on a cluster: a fan-out pooled behind a worker of two
    slots reads as its ready nodes at /backlog (the reconcilers' totals, a pass old),
    and as none once cancelled."""
    width = 600
    # a pool idle past publish_grace_s is published: not for a busy machine's stall here
    settings = cluster_settings.model_copy(update={"publish_grace_s": 10.0})
    worker = workers.start(settings, concurrency=2, args=("-t", "function"))
    client = Client(settings)
    wait_until(lambda: pulling_slots(client) == 2, timeout=60, what="the worker's two slots")
    plan = Plan.model_validate({"nodes": [
        {"type": "function", **node} for node in fan_out(width, seconds=0.5)
    ]})  # fmt: skip
    run = client.submit(plan)
    urls = settings.redis.url or "", settings.redis.broker_url or ""
    reader = MetricsReader(settings, *urls, build_registry(settings))

    def backlog() -> ReadyBacklog:
        return {found.queue: found for found in reader.backlogs()}[QUEUE]

    wait_until(lambda: backlog().ready >= width - 50, timeout=60, what="the fan-out's backlog")
    found = backlog()
    assert found.waiting is not None and found.waiting <= 2, found  # what the list alone shows
    assert found.pooled >= width - 52
    client.cancel(run.run_id)
    wait_until(lambda: backlog().ready == 0, timeout=30, what="the pool uncounted")
    assert worker.process.poll() is None, worker.log_tail()


def test_reconcilers_sharing_the_buckets_each_total_their_own_and_the_readers_sum_them(
    worker_env: ExecutionEnv,
) -> None:
    run_runtime, machine = worker_env.runtime, worker_env.runtime.machine
    settings = run_runtime.settings
    runs = []
    for _ in range(8):
        run_id, _ = start(run_runtime, fan_out(5))
        assert machine.pool(run_id, readied(run_runtime, run_id)) == 5
        runs.append(run_id)
    first, second = patient_reconciler(worker_env), patient_reconciler(worker_env)
    for reconciler in (first, second, first, second):  # the second takes its share
        reconciler.run_once()
    assert first.leases.held and second.leases.held
    assert not first.leases.held & second.leases.held

    def summed() -> dict[str, int]:
        buckets = settings.dispatch.reconciler_buckets
        return read_pooled(run_runtime.client, run_runtime.keys, buckets=buckets)

    assert summed() == {QUEUE: 8 * 5}
    for run_id in runs[:3]:
        machine.cancel(run_id, "enough")
    first.run_once()
    second.run_once()
    assert summed() == {QUEUE: 5 * 5}
