"""Re-planning a failed branch reads its run through the run store (real Valkey, the
state machine driven by hand): what the new planner is told and what it depends on."""

from __future__ import annotations

import json

import pytest

from dagwright.models import Node
from dagwright.orchestrator.execution.replanning import replanner_for
from dagwright.orchestrator.runtime import Runtime
from dagwright.planning.planner import PlanRequest
from dagwright.settings import Settings
from tests.support.runstate import finish, start

NODES = [
    {"id": "fetch"},
    {"id": "parse", "depends_on": ["fetch"]},
    {"id": "report", "depends_on": ["parse"]},
    {"id": "alert", "depends_on": ["parse"], "run_if": "any_failed"},
    {"id": "side"},
]


@pytest.fixture
def runtime(no_worker_settings: Settings) -> Runtime:
    return Runtime.from_settings(no_worker_settings)


def goal_run(runtime: Runtime, replans: int, replan_max: int) -> str:
    """A run of ``NODES`` made a goal run (a planning request, re-plan counters)."""
    run_id, _ = start(runtime, NODES)
    request = PlanRequest(goal="Summarise the feed", max_nodes=10, max_depth=5)
    runtime.client.hset(
        runtime.keys.run_key(run_id, "run"),
        mapping={
            "request": request.model_dump_json(),
            "replans": replans,
            "replan_max": replan_max,
        },
    )
    return run_id


def test_a_plan_run_or_one_without_replans_left_is_not_replanned(runtime: Runtime) -> None:
    plan_run, _ = start(runtime, NODES)
    used_up = goal_run(runtime, replans=1, replan_max=1)
    failed = Node(id="parse", type="function", function="noop")
    assert runtime.store.replan_reading(plan_run) is None
    assert runtime.store.replan_reading(used_up) is None
    assert replanner_for(runtime, plan_run, failed, "boom") is None
    assert replanner_for(runtime, used_up, failed, "boom") is None


def test_the_branch_is_the_failed_node_and_what_waits_on_it_but_not_its_handlers(
    runtime: Runtime,
) -> None:
    run_id = goal_run(runtime, replans=0, replan_max=2)
    finish(runtime, run_id, "fetch", output='"feed"')
    failed = Node(id="parse", type="function", function="noop", depends_on=["fetch"])
    replanner = replanner_for(runtime, run_id, failed, "bad feed")
    assert replanner is not None
    template = Node.model_validate_json(replanner.spec_template)
    assert template.depends_on == ["fetch"]  # the completed node the branch used
    asked = PlanRequest.model_validate(template.params)
    assert (asked.failed_node, asked.error) == ("parse", "bad feed")
    assert [spec["id"] for spec in asked.replace] == ["parse", "report"]
    assert asked.completed == ["fetch"]
    assert asked.open == ["alert", "side"]  # the handler runs for the failure: not replaced
    assert set(asked.taken) >= {"fetch", "parse", "report", "alert", "side"}


def test_the_reading_decodes_the_runs_edges_and_rules(runtime: Runtime) -> None:
    run_id = goal_run(runtime, replans=0, replan_max=1)
    reading = runtime.store.replan_reading(run_id)
    assert reading is not None
    assert json.loads(reading.request_json)["goal"] == "Summarise the feed"
    assert reading.dependents["parse"] == ["report", "alert"]
    assert reading.deps["report"] == ["parse"]
    assert reading.run_if == {"alert": "any_failed"}
    assert reading.pending_after("fetch", {"alert"}) == ["parse", "report"]
    assert runtime.store.node_specs(run_id, ["report", "missing"])[0]["id"] == "report"
