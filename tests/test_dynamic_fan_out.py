"""Dynamic fan-out (``Node.map``) end to end: a real Celery worker, a real Valkey."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import pytest

from dagwright import Client, PlanBuilder, PlanError, RunFailedError, RunStatus, Settings
from dagwright.models import Plan, RunIf
from dagwright.plans.builder import map_over
from dagwright.testing import FakeAnthropicServer
from tests.support.api_server import ApiServer
from tests.support.cli import cli_env, dagwright, json_out
from tests.support.functions import fixed_key, release_key
from tests.support.llm_script import answers
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("worker")


def researched(count: int, **mapping: object) -> Plan:
    """find -> research (one child per company) -> report (the joined list). A child's
    ``concat`` joins its params, filled from its item, and then its input: the item."""
    plan = PlanBuilder("one researcher per company")
    find = plan.function("find", "companies", params={"count": count})
    research = plan.function(
        "research",
        "concat",
        params={"parts": ["research", "{{ item }}", "#{{ index }}"], "sep": " "},
        depends_on=[find],
        map=map_over(find, "companies", **mapping),  # type: ignore[arg-type]
    )
    plan.function("report", "echo_inputs", depends_on=[research])
    return plan.build(output="report")


def test_a_mapped_node_spawns_one_child_per_item_joined_in_order(client: Client) -> None:
    run = client.submit(researched(12))
    assert run.result(timeout=60) == {"research": [f"research co{i} #{i} co{i}" for i in range(12)]}
    state = run.status()
    children = [f"research[{i}]" for i in range(12)]
    assert {state.nodes[child].status.value for child in children} == {"succeeded"}
    assert state.nodes["research[3]"].output == "research co3 #3 co3"
    assert state.nodes["research[3]"].type == "function"
    assert (state.counts.total, state.counts.succeeded) == (15, 15)
    traced = {span.node for span in client.trace(run.run_id).spans}
    assert set(children) <= traced
    detail = client.node(run.run_id, "research[3]")
    assert detail.inputs == {"find": "co3"}  # its item, in place of the whole list


def test_each_child_sees_its_item_as_the_mapped_output(client: Client) -> None:
    plan = PlanBuilder()
    find = plan.function("find", "companies", params={"count": 3})
    plan.function("look", "echo_inputs", depends_on=[find], map=map_over(find, "companies"))
    assert client.submit(plan.build(output="look")).result(timeout=60) == [
        {"find": "co0"},
        {"find": "co1"},
        {"find": "co2"},
    ]


def test_an_empty_list_joins_to_an_empty_list_at_once(client: Client) -> None:
    run = client.submit(researched(0))
    assert run.result(timeout=30) == {"research": []}
    state = run.status()
    assert state.counts.total == 3
    assert [event.kind for event in run.events() if event.node == "research"][-1] == (
        "node.succeeded"
    )


def test_a_list_over_the_bound_fails_the_node_naming_it(client: Client) -> None:
    run = client.submit(researched(5, max_items=4))
    with pytest.raises(RunFailedError, match="5 items, over its bound of 4"):
        run.result(timeout=30)
    state = run.status()
    assert state.nodes["research"].status.value == "failed"
    assert state.nodes["report"].status.value == "blocked"
    assert not [node for node in state.nodes if node.startswith("research[")]


def test_truncate_maps_the_first_items_only(client: Client) -> None:
    run = client.submit(researched(5, max_items=2, truncate=True))
    assert run.result(timeout=30) == {"research": ["research co0 #0 co0", "research co1 #1 co1"]}


def test_max_items_over_the_settings_cap_is_a_plan_problem(client: Client) -> None:
    cap = client.settings.limits.map_max_items
    with pytest.raises(PlanError, match=f"map.max_items {cap + 1}; the limit is {cap}"):
        client.submit(researched(1, max_items=cap + 1))


def test_a_map_over_a_node_it_does_not_depend_on_is_a_plan_problem(client: Client) -> None:
    plan = PlanBuilder()
    plan.function("find", "companies", params={"count": 1})
    plan.function("look", "echo_inputs", map=map_over("find"))
    with pytest.raises(PlanError, match="maps over 'find', which is not in its depends_on"):
        client.submit(plan.build())


def failing_on(bad: str, count: int, run_if: RunIf | None = None) -> Plan:
    """find -> research, whose child for item ``bad`` fails until the test fixes it."""
    plan = PlanBuilder()
    find = plan.function("find", "companies", params={"count": count})
    plan.function(
        "research",
        "fails_on_until_fixed",
        params={"item": "{{ item }}", "bad": bad},
        depends_on=[find],
        map=map_over(find, "companies"),
        run_if=run_if,
    )
    return plan.build(output="research")


def test_a_failed_child_is_replayed_from_the_dlq_and_the_run_completes(client: Client) -> None:
    run = client.submit(failing_on("co2", count=4))
    with pytest.raises(RunFailedError, match="research\\[2\\]"):
        run.result(timeout=60)
    state = run.status()
    assert state.nodes["research[2]"].status.value == "failed"
    assert state.nodes["research"].status.value == "blocked"
    [entry] = client.dlq.list(run_id=run.run_id)
    assert entry.node_id == "research[2]"
    client.runtime.client.set(fixed_key(run.run_id), "1")
    client.dlq.replay(entry.id)
    assert run.result(timeout=60) == [f"researched co{i}" for i in range(4)]


def test_cancel_mid_map_cancels_the_open_children(client: Client) -> None:
    plan = PlanBuilder()
    find = plan.function("find", "companies", params={"count": 6})
    plan.function("hold", "held_until_released", depends_on=[find], map=map_over(find, "companies"))
    run = client.submit(plan.build())
    wait_until(
        lambda: (
            run.status().nodes.get("hold[0]") is not None
            and run.status().nodes["hold[0]"].status.value == "running"
        ),
        timeout=30,
    )
    client.cancel(run.run_id)
    state = run.wait(timeout=30)
    assert state.status == RunStatus.CANCELLED
    statuses = {node: n.status.value for node, n in state.nodes.items()}
    assert statuses["hold"] == "cancelled"
    assert {statuses[f"hold[{i}]"] for i in range(6)} == {"cancelled"}
    client.runtime.client.set(release_key(run.run_id), "1")


def test_the_api_shows_a_maps_children_and_each_ones_detail(api: ApiServer) -> None:
    run_id = api.client.submit(researched(3)).run_id
    assert api.client.wait(run_id, timeout=60).status == RunStatus.SUCCEEDED
    with api.http("read") as http:
        nodes = http.get(f"/api/v1/runs/{run_id}").json()["nodes"]
        assert {f"research[{i}]" for i in range(3)} <= set(nodes)
        assert nodes["research"]["output"][1] == "research co1 #1 co1"
        child = http.get(f"/api/v1/runs/{run_id}/nodes/{quote('research[1]')}").json()
        assert child["inputs"] == {"find": "co1"}
        assert child["spec"]["map"] == {
            "over": "find",
            "path": "companies",
            "index": 1,
            "item": "co1",
        }


def test_the_example_plan_runs_from_the_command_line(settings: Settings, tmp_path: Path) -> None:
    env = cli_env(settings, tmp_path / "data")
    done = dagwright("run", "examples/plans/map_companies.yaml", "--json", env=env)
    assert done.returncode == 0, done.stderr
    out = json_out(done)
    assert out["nodes"]["research"]["output"] == [
        "researched acme (#0) acme",
        "researched globex (#1) globex",
        "researched initech (#2) initech",
    ]
    assert out["result"].startswith('report: ["researched acme (#0) acme",')


def test_a_map_with_all_done_joins_its_childrens_outcomes(client: Client) -> None:
    state = client.submit(failing_on("co1", count=3, run_if="all_done")).wait(timeout=60)
    assert state.status == RunStatus.FAILED  # a handled failure is still a failure
    joined = state.nodes["research"].output
    assert [outcome["status"] for outcome in joined] == ["succeeded", "failed", "succeeded"]
    assert joined[0]["output"] == "researched co0"
    assert joined[1]["error"]["message"] == "cannot research co1 (on purpose)"


@pytest.mark.parametrize(
    ("node", "problem"),
    [
        ({"id": "a[1]", "type": "function", "function": "noop"}, "ids ending in [<n>] are"),
        (
            {"id": "x", "type": "function", "function": "concat", "params": {"p": "{{ item }}"}},
            "uses {{ item }} or {{ index }} but has no map",
        ),
        (
            {
                "id": "x",
                "type": "researcher",
                "instruction": "Research {{ item }}",
                "depends_on": ["find"],
                "map": {"over": "find"},
            },
            "{{ item }} goes in params only",
        ),
        (
            {
                "id": "x",
                "type": "function",
                "function": "noop",
                "depends_on": ["find"],
                "map": {"over": "find", "index": 2},
            },
            "map.index and map.item are set by dagwright",
        ),
    ],
)
def test_plans_misusing_map_are_refused_naming_the_problem(
    client: Client, node: dict[str, object], problem: str
) -> None:
    find = {"id": "find", "type": "function", "function": "noop"}
    with pytest.raises(PlanError, match=re.escape(problem)):
        client.submit(Plan.model_validate({"nodes": [find, node]}))


def test_one_agent_per_item_each_seeing_its_item_as_data(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(*(answers("writer", f"A line on co{i}.", f"co{i}") for i in range(3)))
    plan = PlanBuilder("one writer per company")
    find = plan.function("find", "companies", params={"count": 3})
    plan.agent(
        "lines",
        "writer",
        "Write one line about the company you are given.",
        depends_on=[find],
        map=map_over(find, "companies"),
    )
    run = client.submit(plan.build(output="lines"))
    assert run.result(timeout=60) == [f"A line on co{i}." for i in range(3)]
    prompts = [str(request.body["messages"][0]["content"]) for request in fake_llm.requests]
    assert len(prompts) == 3
    for prompt in prompts:  # each saw its own item, fenced as data, and no other
        assert sum(f"co{i}" in prompt for i in range(3)) == 1
        assert 'node=\\"find\\"' in prompt or 'node="find"' in prompt
