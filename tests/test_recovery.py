"""Real worker subprocesses: SIGKILL mid-node, and a 10,000-node plan."""

from __future__ import annotations

import os
import signal

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.plans.builder import map_over
from dagwright.testing import FakeAnthropicServer
from tests.support.functions import REREADER, executions_key
from tests.support.llm_script import RESEARCHER, UNPRICED_MODEL, text, turn, write
from tests.support.processes import Workers
from tests.support.waiting import wait_until


def holder_pid(client: Client, run_id: str, node: str) -> int:
    holder = client.runtime.client.hget(client.runtime.keys.run_key(run_id, "holder"), node)
    return int(holder.rpartition(":")[2]) if holder else 0


def slow_pipeline() -> PlanBuilder:
    plan = PlanBuilder("survive a crash")
    slow = plan.function("slow", "count", params={"seconds": 3})
    plan.function("after", "count", depends_on=[slow])
    return plan


def test_a_pool_process_killed_mid_node_is_recovered_at_once(
    broker_subprocess_settings: Settings, workers: Workers
) -> None:
    """On each broker: the killed process's message is handed back at once by both."""
    # A lease far longer than the wait below: only the takeover can recover the node in time.
    settings = broker_subprocess_settings.model_copy(update={"lease_s": 60.0})
    workers.start(settings)
    client = Client(settings)
    run = client.submit(slow_pipeline().build())
    victim = wait_until(
        lambda: holder_pid(client, run.run_id, "slow"), timeout=30, what="slow running"
    )
    os.kill(victim, signal.SIGKILL)
    state = run.wait(timeout=20)
    assert state.status == RunStatus.SUCCEEDED, workers[0].log_tail()
    kinds = [(e.kind, e.node) for e in run.events(follow=False)]
    assert ("node.takeover", "slow") in kinds  # redelivered by Celery, taken over: no lease wait
    assert kinds.count(("node.succeeded", "slow")) == 1
    assert state.nodes["slow"].attempts == 2
    counts = client.runtime.client.hgetall(executions_key(run.run_id))
    assert counts == {"slow": "1", "after": "1"}


def test_a_whole_worker_killed_mid_node_is_recovered_by_lease_expiry(
    subprocess_settings: Settings, workers: Workers
) -> None:
    first = workers.start(subprocess_settings)
    client = Client(subprocess_settings)
    run = client.submit(slow_pipeline().build())
    wait_until(lambda: holder_pid(client, run.run_id, "slow"), timeout=30, what="slow running")
    first.kill_all()  # main process and pool: nothing hands the message back
    workers.start(subprocess_settings)
    state = run.wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, workers[1].log_tail()
    kinds = [(e.kind, e.node) for e in run.events(follow=False)]
    assert ("node.lease_expired", "slow") in kinds
    assert kinds.count(("node.succeeded", "slow")) == 1


def test_a_ten_thousand_node_plan_completes(
    subprocess_settings: Settings, workers: Workers
) -> None:
    workers.start(subprocess_settings)
    plan = PlanBuilder("ten thousand")
    root = plan.function("root", "noop")
    middle = [plan.function(f"n{i}", "noop", depends_on=[root]) for i in range(9_998)]
    plan.function("join", "concat", params={"parts": ["joined"]}, depends_on=middle[:3])
    run = Client(subprocess_settings).submit(plan.build(output="join"))
    state = run.wait(timeout=300)
    assert state.status == RunStatus.SUCCEEDED, workers[0].log_tail()
    assert state.counts.succeeded == 10_000
    assert state.result == "joined null null null"


def test_an_agent_killed_mid_loop_resumes_without_repeating_a_finished_llm_call(
    subprocess_settings: Settings,
    workers: Workers,
    fake_llm: FakeAnthropicServer,
) -> None:
    fake_llm.add(
        turn(RESEARCHER, 1, write("a.md", "a.md")),
        turn(RESEARCHER, 3, write("b.md", "b.md")),
        turn(
            RESEARCHER, 5, write("c.md", "c.md"), delay_s=10
        ),  # turn 3: in flight when the worker dies
        turn(RESEARCHER, 5, write("c.md", "c.md")),  # the same request again, after the resume
        turn(RESEARCHER, 7, text("all written")),
    )
    first = workers.start(subprocess_settings)
    client = Client(subprocess_settings)
    plan = PlanBuilder()
    plan.agent("research", "researcher", "Write three notes.")
    run = client.submit(plan.build())
    wait_until(lambda: len(fake_llm.requests) == 3, timeout=30, what="turn 3 in flight")
    first.kill_all()
    workers.start(subprocess_settings)

    state = run.wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, workers[1].log_tail()
    assert state.result == "all written" and state.nodes["research"].attempts == 2
    digests = [request.body_sha256 for request in fake_llm.requests]
    assert len(digests) == 5
    assert digests[3] == digests[2]  # only the request in flight at the kill was repeated
    assert len(set(digests)) == 4
    workspace = client.runtime.client.hkeys(client.runtime.keys.run_key(run.run_id, "workspace"))
    assert sorted(workspace) == ["a.md", "b.md", "c.md"]
    assert state.nodes["research"].usage.llm_calls == 4  # the lost call's answer never arrived


def test_an_agent_killed_after_summarising_resumes_from_its_summary(
    subprocess_settings: Settings,
    workers: Workers,
    fake_llm: FakeAnthropicServer,
) -> None:
    """Context management's client-side fallback under SIGKILL: the summary call is saved
    with the conversation it made, so the resumed agent neither summarises again nor
    repeats any call that returned, only the one in flight at the kill."""
    read = {"type": "tool_use", "name": "workspace_read", "input": {"path": "big.txt"}}
    fake_llm.add(
        {"match": {"system_contains": REREADER, "messages_count": 1}, "reply": {"content": [read]}},
        {
            "match": {"system_contains": REREADER, "tool_result_for": "workspace_read"},
            "reply": {"content": [read]},
            "times": 26,
            "delay_s": 0.3,  # slow enough that the kill lands during a call
        },
        {"match": {"system_contains": REREADER}, "reply": {"content": [text("read")]}},
        {
            "match": {"system_contains": "You condense"},
            "reply": {"content": [text("Read it.")]},
            "times": -1,
        },
    )
    first = workers.start(subprocess_settings)
    client = Client(subprocess_settings)
    plan = PlanBuilder("Read a big file many times")
    seed = plan.function("seed", "write_file", params={"path": "big.txt", "chars": 6_000})
    plan.agent("reader", "rereader", "Read it.", depends_on=[seed], model=UNPRICED_MODEL)
    run = client.submit(plan.build())

    def reading_on_from_the_summary() -> bool:
        systems = [str(r.body.get("system")) for r in fake_llm.requests]
        done = [i for i, system in enumerate(systems) if "You condense" in system]
        return bool(done) and len(systems) > done[0] + 1  # the call after it was made

    wait_until(reading_on_from_the_summary, timeout=120, what="a call after the summary")
    first.kill_all()
    workers.start(subprocess_settings)

    state = run.wait(timeout=120)
    assert state.status == RunStatus.SUCCEEDED, workers[1].log_tail()
    assert state.result == "read" and state.nodes["reader"].attempts == 2
    digests = [request.body_sha256 for request in fake_llm.requests]
    assert len(digests) - len(set(digests)) <= 1  # at most the call in flight, again
    assert len(summaries(fake_llm)) == 1  # summarised once, before the kill
    last = fake_llm.requests[-1].body["messages"][0]["content"]
    assert "Read it." in last[-1]["text"]  # the resumed conversation starts from it


def summaries(fake: FakeAnthropicServer) -> list[object]:
    return [r for r in fake.requests if "You condense" in str(r.body.get("system"))]


def test_a_map_child_killed_mid_node_runs_once_more_and_the_map_joins_once(
    subprocess_settings: Settings, workers: Workers
) -> None:
    settings = subprocess_settings.model_copy(update={"lease_s": 60.0})
    workers.start(settings)
    client = Client(settings)
    plan = PlanBuilder("a map survives a crash")
    find = plan.function("find", "companies", params={"count": 3})
    plan.function(
        "each", "count", params={"seconds": 3}, depends_on=[find], map=map_over(find, "companies")
    )
    run = client.submit(plan.build(output="each"))
    victim = wait_until(
        lambda: holder_pid(client, run.run_id, "each[1]"), timeout=30, what="each[1] running"
    )
    os.kill(victim, signal.SIGKILL)
    state = run.wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED, workers[0].log_tail()
    assert state.result == ["each[0]", "each[1]", "each[2]"]
    kinds = [(e.kind, e.node) for e in run.events(follow=False)]
    assert kinds.count(("node.mapped", "each")) == 1  # spawned once
    assert kinds.count(("node.succeeded", "each")) == 1  # joined once
    assert all(kinds.count(("node.succeeded", f"each[{i}]")) == 1 for i in range(3))
    assert state.nodes["each[1]"].attempts == 2
