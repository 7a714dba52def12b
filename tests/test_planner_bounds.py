"""The planner's bounds (pure): what a planned plan may set, and what a person's plan may."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dagwright.models import Plan, RetryPolicy
from dagwright.orchestrator.execution.backoff import compute_backoff
from dagwright.planning.bounds import bounds_problems, longest_retry_delay_s
from dagwright.planning.planner import PlanRequest, plan_problems, planner_catalog
from dagwright.plans.validation import PlanLimits, validate_plan
from dagwright.registry import build_registry
from dagwright.settings import PlannerSettings, Settings
from dagwright.workers import builtin_registry

REQUEST = PlanRequest(goal="g", max_nodes=10, max_depth=5)

# What issue 17 found accepted from a planner: every knob turned as far as it goes.
OUT_OF_BOUNDS = [
    {"id": "ask", "type": "writer", "instruction": "A.", "approval": "required"},
    {"id": "again", "type": "writer", "instruction": "B.", "retry": {"max_attempts": 100}},
    {"id": "slow", "type": "writer", "instruction": "C.", "timeout_s": 21600},
    {"id": "nap", "type": "function", "function": "sleep", "params": {"seconds": 20000}},
]


def plan_of(*nodes: dict[str, Any], output: str | None = "ask") -> Plan:
    return Plan.model_validate({"goal": "g", "output": output, "nodes": list(nodes)})


def planned_problems(plan: Plan, settings: Settings | None = None, **request: Any) -> list[str]:
    settings = settings or Settings()
    asked = REQUEST.model_copy(update=request)
    return plan_problems(
        plan, asked, planner_catalog(builtin_registry(), asked, settings), settings
    )


def test_every_knob_out_of_bounds_is_one_problem_saying_what_to_fix() -> None:
    assert planned_problems(plan_of(*OUT_OF_BOUNDS)) == [
        "node 'slow' asks timeout_s 21600; the limit is 1800 (DAGWRIGHT_PLANNER_MAX_TIMEOUT_S)",
        "node 'ask' sets `approval: required`, which a planned node may not "
        "(DAGWRIGHT_PLANNER_ALLOW_APPROVALS): remove `approval`",
        "node 'again' asks retry.max_attempts 100; a planned node may have at most 5 "
        "(DAGWRIGHT_PLANNER_MAX_ATTEMPTS): lower it or leave `retry` unset",
        "node 'nap' sleeps 20000 s; a planned node may sleep at most 300 s "
        "(DAGWRIGHT_PLANNER_MAX_SLEEP_S): lower `params.seconds`",
    ]


def test_a_plan_a_person_writes_is_not_bounded() -> None:
    graph = validate_plan(plan_of(*OUT_OF_BOUNDS), builtin_registry(), PlanLimits())
    assert len(graph.topological_order) == 4


def test_settings_widen_the_bounds() -> None:
    wide = Settings(
        planner_allow_approvals=True,
        planner_max_attempts=100,
        planner_max_timeout_s=21600,
        planner_max_sleep_s=20000,
    )
    assert planned_problems(plan_of(*OUT_OF_BOUNDS), wide) == []


def test_a_planned_plan_over_its_node_limit_is_read_for_its_other_problems() -> None:
    nodes = [{"id": f"n{i}", "type": "writer", "instruction": "N.", "depends_on": ["n0"]}
             for i in range(3)]  # fmt: skip
    found = planned_problems(plan_of(*nodes, output="n1"), max_nodes=2)
    assert found == [
        "the plan has 3 nodes; the limit is 2 (--max-nodes / DAGWRIGHT_PLANNER_MAX_NODES)",
        "node 'n0' depends on itself; remove 'n0' from its depends_on",
    ]
    beyond = planned_problems(plan_of(*nodes, output="n1"), Settings(max_nodes=2), max_nodes=2)
    assert beyond == [found[0]]  # past DAGWRIGHT_MAX_NODES, a plan is not read further


def test_a_timeout_over_both_limits_is_one_problem_naming_the_lower() -> None:
    slow = plan_of(
        {"id": "a", "type": "writer", "instruction": "A.", "timeout_s": 30000}, output="a"
    )
    assert planned_problems(slow) == [
        "node 'a' asks timeout_s 30000; the limit is 1800 (DAGWRIGHT_PLANNER_MAX_TIMEOUT_S)"
    ]
    lax = Settings(planner_max_timeout_s=100_000)
    assert planned_problems(slow, lax) == [
        "node 'a' asks timeout_s 30000; the limit is 21600 (DAGWRIGHT_MAX_TIMEOUT_S)"
    ]


def test_long_retry_delays_are_bounded() -> None:
    retry = {"max_attempts": 5, "backoff_s": 60, "backoff_max_s": 3600}
    [found] = planned_problems(
        plan_of({"id": "a", "type": "writer", "instruction": "A.", "retry": retry}, output="a")
    )
    assert found == (
        "node 'a' would wait up to 480 s between attempts; a planned node may wait at most "
        "300 s (DAGWRIGHT_PLANNER_MAX_RETRY_DELAY_S): lower retry.backoff_s and "
        "retry.backoff_max_s"
    )
    fine = {"max_attempts": 5, "backoff_s": 60, "backoff_max_s": 120}
    assert (
        planned_problems(
            plan_of({"id": "a", "type": "writer", "instruction": "A.", "retry": fine}, output="a")
        )
        == []
    )


@given(
    st.integers(1, 100),
    st.floats(0, 24 * 3600, allow_nan=False),
    st.floats(0, 24 * 3600, allow_nan=False),
)
def test_the_longest_retry_delay_is_the_largest_backoff(
    attempts: int, backoff_s: float, backoff_max_s: float
) -> None:
    retry = RetryPolicy(
        max_attempts=attempts, backoff_s=backoff_s, backoff_max_s=backoff_max_s, jitter=False
    )
    delays = [compute_backoff(retry, attempt) for attempt in range(1, attempts)]
    assert longest_retry_delay_s(retry) == pytest.approx(max(delays, default=0.0))


def test_sleep_without_seconds_waits_its_default_and_other_functions_are_not_sleeps() -> None:
    bounds = Settings().planner.model_copy(update={"max_sleep_s": 0.5})
    naps = plan_of(
        {"id": "a", "type": "function", "function": "sleep"},
        {"id": "b", "type": "function", "function": "concat", "params": {"seconds": 9}},
        output="a",
    )
    assert bounds_problems(naps, bounds) == [
        "node 'a' sleeps 1 s; a planned node may sleep at most 0.5 s "
        "(DAGWRIGHT_PLANNER_MAX_SLEEP_S): lower `params.seconds`"
    ]


def test_python_is_planned_only_when_the_goal_or_the_settings_allow_it() -> None:
    code = plan_of({"id": "a", "type": "python", "code": "print(1)"}, output="a")
    [found] = planned_problems(code)
    assert found.startswith(
        "node 'a' has type 'python', which is not allowed in this run (allowed:"
    )
    assert "writer" in found and "python" not in found.split("allowed:")[1]
    assert planned_problems(code, worker_types=["python"]) == []
    assert planned_problems(code, Settings(planner_allow_python=True)) == []
    catalog = planner_catalog(builtin_registry(), REQUEST, Settings())
    assert "python" not in catalog.type_names() and "- python" not in catalog.describe()


def test_celery_tasks_are_planned_only_when_the_goal_names_the_type() -> None:
    """A model would otherwise pick tasks of the team's own Celery app by name."""
    settings = Settings(celery_app="team:app", planner_allow_python=True)
    registry = build_registry(settings)
    assert "celery_task" in registry.type_names()
    assert "celery_task" not in planner_catalog(registry, REQUEST, settings).type_names()
    asked = REQUEST.model_copy(update={"worker_types": ["celery_task"]})
    assert planner_catalog(registry, asked, settings).type_names() == ["celery_task"]


def test_the_planner_section_holds_every_planner_setting() -> None:
    settings = Settings(planner_max_sleep_s=12.0)
    held = {PlannerSettings.flat_name(name) for name in PlannerSettings.model_fields}
    assert held >= {name for name in Settings.flat_fields() if name.startswith("planner_")}
    assert settings.planner.max_sleep_s == 12.0


@given(
    approval=st.booleans(),
    attempts=st.integers(1, 100),
    timeout_s=st.none() | st.floats(1, 6 * 3600),
    sleep_s=st.floats(0, 86400),
)
def test_a_problem_is_reported_exactly_for_each_knob_past_its_bound(
    approval: bool, attempts: int, timeout_s: float | None, sleep_s: float
) -> None:
    bounds = Settings().planner
    agent: dict[str, Any] = {"id": "a", "type": "writer", "instruction": "A."}
    agent |= {"retry": {"max_attempts": attempts}, "timeout_s": timeout_s}
    if approval:
        agent["approval"] = "required"
    nap = {"id": "nap", "type": "function", "function": "sleep", "params": {"seconds": sleep_s}}
    found = " ".join(planned_problems(plan_of(agent, nap, output="a")))
    expected = {
        "ALLOW_APPROVALS": approval,
        "MAX_ATTEMPTS": attempts > bounds.max_attempts,
        "MAX_TIMEOUT_S": timeout_s is not None and timeout_s > bounds.max_timeout_s,
        "MAX_SLEEP_S": sleep_s > bounds.max_sleep_s,
    }
    assert {k for k in expected if f"DAGWRIGHT_PLANNER_{k})" in found} == {
        k for k, breached in expected.items() if breached
    }
