"""Pure pieces of planning: synthesis, the catalog the planner reads, its checks."""

from __future__ import annotations

from dagwright.models import Plan
from dagwright.planning.goals import with_synthesis
from dagwright.planning.planner import PlanRequest, RestrictedCatalog, plan_problems
from dagwright.settings import Settings
from dagwright.workers import builtin_registry


def plan_of(*nodes: dict[str, object], output: str | None = None) -> Plan:
    return Plan.model_validate({"goal": "g", "output": output, "nodes": list(nodes)})


def test_a_plan_without_output_gets_a_writer_over_its_sinks() -> None:
    plan = plan_of(
        {"id": "a", "type": "researcher", "instruction": "A."},
        {"id": "b", "type": "researcher", "instruction": "B.", "depends_on": ["a"]},
        {"id": "synthesis", "type": "analyst", "instruction": "C."},
    )
    synthesized = with_synthesis(plan)
    extra = synthesized.nodes[-1]
    assert (extra.id, extra.type, extra.depends_on) == ("synthesis2", "writer", ["b", "synthesis"])
    assert "the run's goal" in (extra.instruction or "")  # shown to it as background
    assert synthesized.output == "synthesis2"
    named = plan_of({"id": "a", "type": "writer", "instruction": "A."}, output="a")
    assert with_synthesis(named) == named


def test_a_plan_ending_in_one_node_answers_with_it_without_a_synthesis() -> None:
    chain = plan_of(
        {"id": "a", "type": "researcher", "instruction": "A."},
        {"id": "b", "type": "writer", "instruction": "B.", "depends_on": ["a"]},
    )
    assert with_synthesis(chain) == chain
    assert chain.output_nodes() == ["b"]
    alone = plan_of({"id": "a", "type": "researcher", "instruction": "A."})
    assert with_synthesis(alone) == alone


def test_the_catalog_lists_allowed_types_with_tools_and_functions() -> None:
    described = RestrictedCatalog(builtin_registry(), ["researcher", "function"]).describe()
    assert (
        "- researcher (agent): Gathers and checks facts" in described
        and "tools: read_input, web_search" in described  # no settings: the names it lists
    )
    assert "    - function concat(parts, sep): Join" in described
    assert "writer" not in described and "planner" not in described


def test_the_planner_checks_limits_types_and_a_replaced_output() -> None:
    request = PlanRequest(goal="g", max_nodes=1, max_depth=1, worker_types=["writer"])
    catalog = RestrictedCatalog(builtin_registry(), request.worker_types)
    too_big = plan_of(
        {"id": "a", "type": "writer", "instruction": "A."},
        {"id": "b", "type": "writer", "instruction": "B."},
    )
    assert plan_problems(too_big, request, catalog, Settings()) == [
        "the plan has 2 nodes; the limit is 1 (--max-nodes / DAGWRIGHT_PLANNER_MAX_NODES)"
    ]
    wrong_type = plan_of({"id": "a", "type": "researcher", "instruction": "A."})
    assert plan_problems(wrong_type, request, catalog, Settings()) == [
        "node 'a' has type 'researcher', which is not allowed in this run (allowed: writer)"
    ]
    [unknown] = plan_problems(plan_of({"id": "a", "type": "writr"}), request, catalog, Settings())
    assert unknown == (
        "node 'a' has type 'writr', which no worker type is registered as "
        "(did you mean 'writer'?); allowed in this run: writer"
    )
    replan = request.model_copy(
        update={"failed_node": "x", "replace": [{"id": "x"}], "run_outputs": ["x"], "taken": ["x"]}
    )
    no_output = plan_of({"id": "y", "type": "writer", "instruction": "Y."})
    assert plan_problems(no_output, replan, catalog, Settings()) == [
        "the run's output ['x'] is replaced: set `output` to the new one"
    ]


def test_without_writers_a_plan_must_name_its_output() -> None:
    request = PlanRequest(goal="g", max_nodes=5, max_depth=5, worker_types=["researcher"])
    catalog = RestrictedCatalog(builtin_registry(), request.worker_types)
    unnamed = plan_of(
        {"id": "a", "type": "researcher", "instruction": "A."},
        {"id": "b", "type": "researcher", "instruction": "B."},
    )
    assert plan_problems(unnamed, request, catalog, Settings()) == [
        "set `output`: the writer that would combine the results is not among the worker "
        "types this plan may use"
    ]
    named = unnamed.model_copy(update={"output": ["a", "b"]})
    assert plan_problems(named, request, catalog, Settings()) == []
    one_sink = plan_of({"id": "a", "type": "researcher", "instruction": "A."})
    assert plan_problems(one_sink, request, catalog, Settings()) == []  # it is the answer
