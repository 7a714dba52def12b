"""Pure plan validation: every problem found, each saying what to fix."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagwright.errors import PlanError
from dagwright.models import Node, Plan
from dagwright.plans.validation import Cycle, PlanLimits, topological_order, validate_plan
from dagwright.workers import builtin_registry

LIMITS = PlanLimits()


def fn(node_id: str, *deps: str, **fields: object) -> dict[str, object]:
    return {
        "id": node_id,
        "type": "function",
        "function": "noop",
        "depends_on": list(deps),
        **fields,
    }


def plan(*nodes: dict[str, object], **fields: object) -> Plan:
    return Plan.model_validate({"nodes": list(nodes), **fields})


def problems(p: Plan, limits: PlanLimits = LIMITS, run: object = None) -> list[str]:
    with pytest.raises(PlanError) as info:
        validate_plan(p, builtin_registry(), limits, run)  # type: ignore[arg-type]
    return info.value.problems


def test_valid_diamond_has_dependents_and_order() -> None:
    graph = validate_plan(
        plan(fn("a"), fn("b", "a"), fn("c", "a"), fn("d", "b", "c")), builtin_registry(), LIMITS
    )
    assert graph.dependents == {"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}
    assert graph.roots == ["a"]
    assert graph.topological_order == ["a", "b", "c", "d"]


def test_cycle_is_named_in_execution_order() -> None:
    found = problems(plan(fn("a", "c"), fn("b", "a"), fn("c", "b"), fn("d")))
    assert found == ["dependency cycle a -> b -> c -> a: remove one of these dependencies"]


def test_two_node_cycle_downstream_of_a_valid_root() -> None:
    found = problems(plan(fn("root"), fn("x", "root", "y"), fn("y", "x"), fn("tail", "y")))
    assert found == ["dependency cycle x -> y -> x: remove one of these dependencies"]


def test_every_structural_problem_is_reported_at_once() -> None:
    found = problems(plan(fn("a"), fn("a"), fn("b", "b"), fn("c", "aa"), output="zz"))
    assert "node id 'a' is used 2 times; ids must be unique" in found
    assert "node 'b' depends on itself; remove 'b' from its depends_on" in found
    assert "node 'c' depends on 'aa', which is not in the plan (did you mean 'a'?)" in found
    assert "output names 'zz', which is not in the plan" in found


def test_unknown_worker_type_suggests_and_lists_registered_types() -> None:
    [found] = problems(plan({"id": "a", "type": "functon", "function": "noop"}))
    assert found.startswith("node 'a' has type 'functon', which no worker type is registered as")
    assert "(did you mean 'function'?)" in found
    registered = found.split("; registered: ")[1].split(", ")  # tests may register more
    assert registered == sorted(registered)
    assert {"analyst", "coder", "function", "python", "researcher", "reviewer", "writer"} <= set(
        registered
    )


def test_function_must_be_registered_never_an_import_path() -> None:
    [found] = problems(plan({"id": "a", "type": "function", "function": "os:system"}))
    assert "function 'os:system' is not registered" in found
    assert "--import" in found


def test_function_node_needs_a_function() -> None:
    [found] = problems(plan({"id": "a", "type": "function"}))
    assert found == "node 'a': a function node needs `function: <name>` (a registered function)"


def test_function_params_are_checked_against_the_signature() -> None:
    found = problems(
        plan(
            {"id": "a", "type": "function", "function": "concat", "params": {"sep": 3}},
            {"id": "b", "type": "function", "function": "sleep", "params": {"secs": 1}},
        )
    )
    assert found == [
        "node 'a': function 'concat': params.sep: Input should be a valid string",
        "node 'b': function 'sleep': params.secs: Extra inputs are not permitted",
    ]


def test_size_limit() -> None:
    found = problems(plan(*(fn(f"n{i}") for i in range(11))), PlanLimits(max_nodes=10))
    assert found == ["the plan has 11 nodes; the limit is 10 (DAGWRIGHT_MAX_NODES)"]


def test_timeout_limit() -> None:
    [found] = problems(plan(fn("a", timeout_s=100)), PlanLimits(max_timeout_s=10))
    assert found == "node 'a' asks timeout_s 100; the limit is 10 (DAGWRIGHT_MAX_TIMEOUT_S)"


def test_ten_thousand_long_chain_needs_no_recursion() -> None:
    nodes = [fn("n0")] + [fn(f"n{i}", f"n{i - 1}") for i in range(1, 10_000)]
    graph = validate_plan(plan(*nodes), builtin_registry(), LIMITS)
    assert graph.topological_order[:3] == ["n0", "n1", "n2"]
    assert len(graph.topological_order) == 10_000


@st.composite
def acyclic_edges(draw: st.DrawFn) -> tuple[int, list[tuple[int, int]]]:
    size = draw(st.integers(1, 30))
    edges = draw(
        st.lists(st.tuples(st.integers(0, size - 1), st.integers(0, size - 1)), max_size=60)
    )
    return size, sorted({(min(a, b), max(a, b)) for a, b in edges if a != b})


def nodes_from(size: int, edges: list[tuple[int, int]]) -> list[Node]:
    deps: dict[int, list[str]] = {i: [] for i in range(size)}
    for low, high in edges:
        deps[high].append(f"n{low}")
    return [
        Node(id=f"n{i}", type="function", function="noop", depends_on=deps[i]) for i in range(size)
    ]


@settings(max_examples=200)
@given(acyclic_edges())
def test_any_acyclic_graph_gets_an_order_respecting_every_edge(
    graph: tuple[int, list[tuple[int, int]]],
) -> None:
    size, edges = graph
    order = topological_order(nodes_from(size, edges))
    assert isinstance(order, list) and sorted(order) == sorted(f"n{i}" for i in range(size))
    position = {node_id: i for i, node_id in enumerate(order)}
    assert all(position[f"n{low}"] < position[f"n{high}"] for low, high in edges)


@settings(max_examples=200)
@given(acyclic_edges(), st.data())
def test_a_back_edge_is_reported_as_a_real_cycle(
    graph: tuple[int, list[tuple[int, int]]], data: st.DataObject
) -> None:
    size, edges = graph
    if not edges:
        return
    low, high = data.draw(st.sampled_from(edges))
    nodes = nodes_from(size, edges)
    # low must now also wait for high: a cycle through the edge low -> high.
    nodes[low] = nodes[low].model_copy(update={"depends_on": [*nodes[low].depends_on, f"n{high}"]})
    cycle = topological_order(nodes)
    assert isinstance(cycle, Cycle)
    deps = {node.id: set(node.depends_on) for node in nodes}
    ring = [*cycle.path, cycle.path[0]]
    assert len(set(cycle.path)) == len(cycle.path)
    assert all(before in deps[after] for before, after in pairwise(ring))


def test_the_longest_chain_is_limited_when_asked() -> None:
    chain = plan(fn("a"), fn("b", "a"), fn("c", "b"))
    assert validate_plan(chain, builtin_registry(), PlanLimits(max_depth=3))
    [found] = problems(chain, PlanLimits(max_depth=2))
    assert found == "the longest dependency chain has 3 nodes; the limit is 2"


def test_ids_starting_with_an_underscore_are_dagwrights() -> None:
    [found] = problems(plan(fn("_plan")))
    assert found == "node id '_plan' is reserved: ids starting with '_' are dagwright's"


def test_a_replan_may_depend_on_completed_and_open_nodes_only() -> None:
    from dagwright.plans.validation import RunContext

    run = RunContext(
        completed=frozenset({"done"}),
        open=frozenset({"busy"}),
        taken=frozenset({"done", "busy", "dead"}),
    )
    graph = validate_plan(
        plan(fn("new", "done", "busy"), fn("newer", "new")), builtin_registry(), LIMITS, run
    )
    assert graph.dependents == {"new": ["newer"], "newer": []}
    assert graph.roots == []  # both wait: new on busy (outside), newer on new
    found = problems(plan(fn("x", "dead"), fn("done")), run=run)
    assert "node 'x' depends on 'dead', which failed or is being replaced" in found[-1]
    assert "node id 'done' is already used in this run; choose another" in found
