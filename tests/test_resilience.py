"""Acceptance of the resilience issue, with real Valkey and real worker processes: SIGKILL
chaos, a Valkey restart, a flapping and a dead LLM API, dead letters and their replay,
and a poison message."""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from dagwright import Client, PlanBuilder, RunHandle, RunStatus, Settings
from dagwright.models import Plan
from dagwright.testing import FakeAnthropicServer
from tests.support.cli import cli_env, dagwright, json_out, one_error_line
from tests.support.functions import executions_key, fixed_key
from tests.support.processes import Workers
from tests.support.settings import make_settings
from tests.support.valkey import RestartableValkey
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


def layered_plan(name: str, *, layers: int = 5, width: int = 6, seconds: float = 0.3) -> Plan:
    """``layers`` x ``width`` nodes, each depending on two nodes of the layer before."""
    plan = PlanBuilder(name)
    previous: list[str] = []
    for layer in range(layers):
        current = []
        for k in range(width):
            deps = [previous[k], previous[(k + 1) % width]] if previous else None
            current.append(
                plan.function(
                    f"l{layer}n{k}", "count", params={"seconds": seconds}, depends_on=deps
                )
            )
        previous = current
    return plan.build()


def completions(run: RunHandle) -> Counter[str]:
    """How many times each node's success was recorded."""
    return Counter(e.node for e in run.events(follow=False) if e.kind == "node.succeeded")


def running_pids(client: Client, runs: list[RunHandle]) -> list[int]:
    """The processes running a node of ``runs`` now (their lease holders)."""
    pids = []
    for run in runs:
        holders = client.runtime.client.hvals(client.runtime.keys.run_key(run.run_id, "holder"))
        pids.extend(int(holder.rpartition(":")[2]) for holder in holders if holder)
    return pids


def assert_each_node_completed_once(runs: list[RunHandle], nodes: int) -> None:
    for run in runs:
        state = run.wait(timeout=0)
        assert state.status == RunStatus.SUCCEEDED, (run.run_id, state.error)
        done = completions(run)
        assert len(done) == nodes and set(done.values()) == {1}, done


def test_sigkill_chaos_loses_nothing_and_completes_every_node_once(
    broker_subprocess_settings: Settings, workers: Workers
) -> None:
    """On each broker (Redis lists, RabbitMQ quorum queues)."""
    # Kills land at random, several on the same node now and then: not poison.
    settings = broker_subprocess_settings.model_copy(update={"max_deliveries": 50})
    for _ in range(2):
        workers.start(settings, concurrency=3)
    client = Client(settings)
    runs = [client.submit(layered_plan(f"chaos {i}")) for i in range(10)]
    dice = random.Random(5)
    kills = whole_workers = 0
    deadline = time.monotonic() + 60
    while kills < 15 and time.monotonic() < deadline:
        time.sleep(1.0)  # the chaos schedule: a kill a second while the runs go on
        if kills % 5 == 4:  # now and then a whole worker: only its lease expiry tells
            victim = dice.choice(workers.alive())
            victim.kill_all()
            workers.start(settings, concurrency=3)
            whole_workers += 1
            kills += 1
            continue
        pids = running_pids(client, runs)
        if pids:
            try:
                os.kill(dice.choice(pids), signal.SIGKILL)
                kills += 1
            except ProcessLookupError:
                pass
    assert kills >= 10, "the runs ended before the chaos could hit them"

    for run in runs:
        state = run.wait(timeout=180)
        assert state.status == RunStatus.SUCCEEDED, workers.log_tails()
    assert_each_node_completed_once(runs, nodes=30)
    recoveries = Counter(
        e.kind
        for run in runs
        for e in run.events(follow=False)
        if e.kind in ("node.takeover", "node.lease_expired")
    )
    # A killed node comes back by a takeover of its redelivered message, or (more often
    # here: its message waits behind the backlog) by its lease expiring.
    assert recoveries.total() >= 5, recoveries


def test_runs_complete_after_a_valkey_restart_with_aof(
    tmp_path: Path, fake_llm_server: FakeAnthropicServer, workers: Workers
) -> None:
    valkey = RestartableValkey(tmp_path / "valkey")
    try:
        settings = make_settings(
            valkey.server, fake_llm_server, tmp_path / "data", state_db=0, broker_db=1
        )
        workers.start(settings, concurrency=3)
        client = Client(settings)
        runs = [client.submit(layered_plan(f"restart {i}", layers=4, width=5)) for i in range(3)]
        wait_until(
            lambda: sum(completions(run).total() for run in runs) >= 10,
            timeout=60,
            what="the runs under way",
        )
        valkey.restart()
        for run in runs:
            state = run.wait(timeout=120)
            assert state.status == RunStatus.SUCCEEDED, workers.log_tails()
        assert_each_node_completed_once(runs, nodes=20)
    finally:
        workers.stop_all()
        valkey.stop()


def answer_every_request(fake_llm: FakeAnthropicServer, text: str = "Found it.") -> None:
    fake_llm.add({"reply": {"content": [{"type": "text", "text": text}]}, "times": -1})


def agents_plan(name: str, count: int) -> Plan:
    plan = PlanBuilder(name)
    for i in range(count):
        plan.agent(f"agent{i}", "researcher", f"Find fact {i}.")
    return plan.build()


def test_agents_succeed_while_30_percent_of_llm_requests_fail(
    subprocess_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer
) -> None:
    settings = subprocess_settings.model_copy(update={"breaker_reset_timeout_s": 2.0})
    answer_every_request(fake_llm)
    fake_llm.set_fault_rate(0.3, (429, 500, 529), seed=11)
    workers.start(settings, concurrency=4)
    client = Client(settings)
    runs = [client.submit(agents_plan(f"flaky api {i}", 4)) for i in range(5)]
    for run in runs:
        state = run.wait(timeout=120)
        assert state.status == RunStatus.SUCCEEDED, workers.log_tails()
    answered = Counter(request.answered_by for request in fake_llm.requests)
    assert answered["fault"] >= 3 and answered["entry"] == 20, answered


def test_a_dead_llm_api_opens_the_breaker_and_nodes_wait_without_burning_attempts(
    subprocess_settings: Settings, workers: Workers, fake_llm: FakeAnthropicServer
) -> None:
    # As many attempts per call as failures open the breaker: it opens before any call
    # could give up, so no node ever fails an attempt because of the outage.
    settings = subprocess_settings.model_copy(
        update={"breaker_fail_max": 3, "breaker_reset_timeout_s": 3.0, "llm_max_attempts": 3}
    )
    answer_every_request(fake_llm)
    fake_llm.set_fault_rate(1.0, (529,), seed=1)
    workers.start(settings, concurrency=3)
    client = Client(settings)
    run = client.submit(agents_plan("dead api", 3))
    breakers = client.runtime.breakers
    model = f"model:{settings.llm.default_model}"
    # Three calls, each through its SDK retries with backoff: on a loaded machine (CI runs
    # two suites at once) that alone can take half a minute.
    wait_until(lambda: breakers.status(model).state == "open", timeout=90, what="breaker open")
    # In flight when it opened: at most one request per node past the threshold.
    assert len(fake_llm.requests) <= settings.breakers.fail_max + 3

    # Proving that nothing happens for three open periods (a sleep is the test here):
    # unguarded, the nodes would have failed by now.
    time.sleep(10)
    state = client.status(run.run_id)
    assert state.status == RunStatus.RUNNING
    assert all(node.attempts <= 1 for node in state.nodes.values()), state.nodes
    kinds = Counter(e.kind for e in run.events(follow=False))
    assert kinds["node.waiting"] >= 3 and kinds["node.retrying"] == 0, kinds
    # One probe per half-open period, over every worker.
    assert len(fake_llm.requests) <= settings.breakers.fail_max + 3 + 5, len(fake_llm.requests)

    fake_llm.set_fault_rate(0)
    state = run.wait(timeout=30)
    assert state.status == RunStatus.SUCCEEDED, workers.log_tails()
    assert breakers.status(model).state == "closed"


@pytest.mark.subprocess
def test_a_permanent_failure_is_dead_lettered_and_replayed_without_rerunning_done_work(
    subprocess_settings: Settings,
    workers: Workers,
    fake_llm: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    answer_every_request(fake_llm)
    workers.start(subprocess_settings)
    client = Client(subprocess_settings)
    plan = PlanBuilder("replay me")
    plan.agent("research", "researcher", "Find the input.")
    plan.function("fix", "broken_until_fixed", depends_on=["research"])
    plan.function("after", "count", depends_on=["fix"])
    plan.function("side", "count")
    run = client.submit(plan.build(output="after"))
    state = run.wait(timeout=60)
    assert state.status == RunStatus.FAILED
    assert state.nodes["fix"].attempts == 1  # permanent: no retry
    env = cli_env(subprocess_settings, tmp_path)

    [letter] = json_out(dagwright("dlq", "list", "--json", "--run", run.run_id, env=env))
    assert (letter["node_id"], letter["classification"], letter["status"]) == (
        "fix",
        "permanent",
        "pending",
    )
    shown = json_out(dagwright("dlq", "show", letter["id"], "--json", env=env))
    assert "PermanentError" in shown["error_class"] and shown["spec"]["function"]
    assert "test-key" not in str(shown)
    llm_requests = len(fake_llm.requests)

    client.runtime.client.set(fixed_key(run.run_id), 1)  # the cause, fixed
    replayed = dagwright("dlq", "replay", letter["id"], env=env)
    assert replayed.returncode == 0, replayed.stderr
    state = run.wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED and state.result == "after"
    assert len(fake_llm.requests) == llm_requests  # the agent's finished LLM call: kept
    assert client.runtime.client.hgetall(executions_key(run.run_id)) == {
        "fix": "2",
        "after": "1",
        "side": "1",
    }
    assert set(completions(run).values()) == {1}

    again = dagwright("dlq", "replay", letter["id"], env=env)
    assert again.returncode == 2 and "replayed already" in one_error_line(again)
    stats = json_out(dagwright("dlq", "stats", "--json", env=env))
    assert stats["by_status"] == {"replayed": 1}


def test_a_poison_message_is_dead_lettered_after_max_deliveries(
    subprocess_settings: Settings, workers: Workers
) -> None:
    # A lease far longer than a busy machine's worker takes to see its child die: a lease
    # that expired first would bring the node back as lost (no fault of its own), uncounted
    settings = subprocess_settings.model_copy(update={"max_deliveries": 2, "lease_s": 20.0})
    workers.start(settings)
    client = Client(settings)
    plan = PlanBuilder("poison")
    plan.function("poison", "kill_my_process")
    plan.function("fine", "count")
    run = client.submit(plan.build())
    state = run.wait(timeout=60)
    assert state.status == RunStatus.FAILED, workers.log_tails()
    assert state.nodes["fine"].status.value == "succeeded"
    [letter] = client.dlq.list(run_id=run.run_id)
    assert letter.classification == "poison" and letter.error_class == "PoisonMessageError"
    runs_of_poison = client.runtime.client.hget(executions_key(run.run_id), "poison")
    assert runs_of_poison == "2"  # two deliveries ran it; the third was refused
    # Each death was seen by the worker's parent, which survived it (issue 31).
    died = [e for e in run.events(follow=False) if e.kind == "node.process_died"]
    assert [e.data["deaths"] for e in died] == ["1", "2"]
    assert all("Worker exited prematurely" in e.data["cause"] for e in died)
