"""Pure plan validation: every problem found, each saying what to fix."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagwright.errors import PlanError
from dagwright.models import Node, Plan
from dagwright.plans.sizes import SizeLimits
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
    found = problems(plan(*(fn(f"n{i}", f"n{i}") for i in range(11))), PlanLimits(max_nodes=10))
    assert found == ["the plan has 11 nodes; the limit is 10 (DAGWRIGHT_MAX_NODES)"]  # not read


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


# -- every stage's problems in one rejection -------------------------------------------


def test_a_cycle_and_an_unknown_type_are_reported_together() -> None:
    found = problems(plan(fn("a", "b"), {**fn("b", "a"), "type": "functon"}))
    assert found[0].startswith("node 'b' has type 'functon', which no worker type is registered")
    assert found[1:] == ["dependency cycle a -> b -> a: remove one of these dependencies"]


def test_a_cycle_is_found_past_unknown_and_self_dependencies() -> None:
    found = problems(plan(fn("a", "b", "ghost"), fn("b", "a", "b")))
    assert found == [
        "node 'a' depends on 'ghost', which is not in the plan",
        "node 'b' depends on itself; remove 'b' from its depends_on",
        "dependency cycle a -> b -> a: remove one of these dependencies",
    ]


def test_size_count_types_and_depth_are_reported_together() -> None:
    chain = [fn("a"), fn("b", "a"), {**fn("c", "b"), "type": "nope"}]
    found = problems(
        plan(*chain, goal="g" * 20),
        PlanLimits(max_nodes=2, max_nodes_read=3, max_depth=2, sizes=SizeLimits(10)),
    )
    assert found[0] == "the plan has 3 nodes; the limit is 2 (DAGWRIGHT_MAX_NODES)"
    assert found[1].startswith("the goal is 20 characters; the limit is 10")
    assert found[2].startswith("node 'c' has type 'nope'")
    assert found[3] == "the longest dependency chain has 3 nodes; the limit is 2"
    assert len(found) == 4


def test_a_plan_over_the_byte_limit_is_not_read_further() -> None:
    big = plan(fn("a", "a", params={"parts": ["x" * 2000]}))
    found = problems(big, PlanLimits(sizes=SizeLimits(max_plan_bytes=1024)))
    [too_big] = found  # the self-dependency is not looked for
    assert too_big.endswith("bytes as JSON; the limit is 1024 (DAGWRIGHT_MAX_PLAN_BYTES)")


def test_a_timeout_over_the_limit_is_reported_for_an_unknown_type_too() -> None:
    found = problems(plan({**fn("a", timeout_s=100), "type": "nope"}), PlanLimits(max_timeout_s=10))
    assert found[0] == "node 'a' asks timeout_s 100; the limit is 10 (DAGWRIGHT_MAX_TIMEOUT_S)"
    assert found[1].startswith("node 'a' has type 'nope'")


def test_only_the_first_unknown_names_get_a_suggestion() -> None:
    nodes = [fn("a"), *(fn(f"n{i}", f"a{i}") for i in range(30))]
    found = problems(plan(*nodes))
    suggested = [p for p in found if "did you mean" in p]
    assert len(found) == 30 and len(suggested) == 20


@st.composite
def faulty_plans(draw: st.DrawFn) -> tuple[list[Node], set[str], PlanLimits]:
    """An acyclic plan with some faults put in, and the kinds of problem they must raise."""
    size, edges = draw(acyclic_edges())
    nodes = nodes_from(size, edges)
    faults: set[str] = set()
    if edges and draw(st.booleans()):
        low, high = draw(st.sampled_from(edges))
        nodes[low] = nodes[low].model_copy(
            update={"depends_on": [*nodes[low].depends_on, f"n{high}"]}
        )
        faults.add("dependency cycle")
    if draw(st.booleans()):
        i = draw(st.integers(0, size - 1))
        nodes[i] = nodes[i].model_copy(update={"type": "unknown"})
        faults.add("which no worker type is registered as")
    if draw(st.booleans()):
        i = draw(st.integers(0, size - 1))
        nodes[i] = nodes[i].model_copy(update={"depends_on": [*nodes[i].depends_on, "ghost"]})
        faults.add("which is not in the plan")
    if draw(st.booleans()):
        i = draw(st.integers(0, size - 1))
        nodes[i] = nodes[i].model_copy(update={"depends_on": [*nodes[i].depends_on, f"n{i}"]})
        faults.add("depends on itself")
    max_nodes = size - 1 if size > 1 and draw(st.booleans()) else size
    if max_nodes < size:
        faults.add("nodes; the limit is")
    return nodes, faults, PlanLimits(max_nodes=max_nodes, max_nodes_read=size)


@settings(max_examples=200)
@given(faulty_plans())
def test_every_fault_put_in_a_plan_is_reported_in_one_rejection(
    case: tuple[list[Node], set[str], PlanLimits],
) -> None:
    nodes, faults, limits = case
    if not faults:
        assert validate_plan(Plan(nodes=nodes), builtin_registry(), limits)
        return
    found = problems(Plan(nodes=nodes), limits)
    assert all(any(fault in problem for problem in found) for fault in faults), (faults, found)
    kinds = {fault for fault in faults for problem in found if fault in problem}
    assert kinds == faults  # and nothing else is reported
    assert len(found) == len(set(found))
