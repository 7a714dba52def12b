"""Pure validation of a plan: no I/O, no Redis, the same for file, builder and LLM plans.

Every problem is a sentence that says what to fix; they are collected, not raised one by
one, and from every stage (sizes, ids, dependencies, types, cycles, depth), so that a
person, or the planner model repairing its plan, sees them all at once.
"""

from __future__ import annotations

import difflib
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from dagwright.errors import PlanError
from dagwright.models import DEFAULT_RUN_IF, Node, Plan
from dagwright.plans.mapping import item_problems, uses_item
from dagwright.plans.sizes import SizeLimits, size_problems
from dagwright.shown_ids import shown_id


class WorkerCatalog(Protocol):
    """What validation needs to know about the registered worker types."""

    def type_names(self) -> list[str]:
        """The types this plan may use."""
        ...

    def registered_type_names(self) -> list[str]:
        """Every type registered here: a run may allow fewer (a goal's ``-w``)."""
        ...

    def node_problems(self, node: Node) -> list[str]: ...

    def unknown_type_hint(self, name: str) -> str:
        """Where a type not registered here is known (live workers serving it), as a
        clause to end its problem with; "" if nowhere."""
        ...


@dataclass(frozen=True)
class PlanLimits:
    max_nodes: int = 10_000
    max_timeout_s: float = 6 * 3600.0
    max_depth: int | None = None  # nodes on the longest dependency chain; None: no limit
    source: str = "DAGWRIGHT_MAX_NODES"  # where the size limit comes from, to say in errors
    timeout_source: str = "DAGWRIGHT_MAX_TIMEOUT_S"  # where max_timeout_s comes from
    # Past this many nodes (and never below max_nodes) a plan is not read further: every
    # other check costs time in proportion to its size. A planner's plan is read up to
    # DAGWRIGHT_MAX_NODES, so one over its own --max-nodes learns its other problems too.
    max_nodes_read: int = 0
    max_map_items: int = 1000  # most children of one mapped node (DAGWRIGHT_MAP_MAX_ITEMS)
    sizes: SizeLimits = field(default_factory=SizeLimits)


INTERNAL_ID_PREFIX = "_"  # ids of dagwright's own nodes (planners); plans may not use it


@dataclass(frozen=True)
class RunContext:
    """Where a plan that extends a running run lands (a re-plan): the run's nodes that
    completed and those still to finish (new nodes may depend on both), and every id the
    run already uses."""

    completed: frozenset[str] = frozenset()
    open: frozenset[str] = frozenset()
    taken: frozenset[str] = frozenset()

    @property
    def dependable(self) -> frozenset[str]:
        return self.completed | self.open


@dataclass(frozen=True)
class PlanGraph:
    """A validated plan with its edges in both directions."""

    plan: Plan
    dependents: dict[str, list[str]]
    topological_order: list[str]

    @property
    def roots(self) -> list[str]:
        return [node.id for node in self.plan.nodes if not node.depends_on]


def validate_plan(
    plan: Plan, catalog: WorkerCatalog, limits: PlanLimits, run: RunContext | None = None
) -> PlanGraph:
    """Check a plan; return its graph, or raise PlanError listing every problem.

    Every check runs, whatever the others found, so that one rejection names all there
    is to fix (a model repairing its plan sees the cycle and the unknown type at once):
    cycles and depth are looked for over the dependencies that are known. Only a plan
    over ``max_plan_bytes`` or ``max_nodes_read`` nodes is not read further.

    With ``run``, the plan extends a running run: dependencies on its completed and open
    nodes are allowed (and left out of the graph returned: they cannot depend on new
    nodes, so no cycle goes through them), and its ids are taken.
    """
    run = run or RunContext()
    problems = _count_problems(plan, limits)
    if len(plan.nodes) > max(limits.max_nodes, limits.max_nodes_read):
        raise PlanError(problems)
    sizes = size_problems(plan, limits.sizes)
    problems += sizes.problems
    if sizes.too_big:  # the other checks could take as long as the plan is big
        raise PlanError(problems)
    problems += _structure_problems(plan, run) + _node_problems(plan, catalog, limits)
    graph, graph_problems = _graph(plan, limits)
    problems += graph_problems
    if problems or graph is None:
        raise PlanError(problems)
    return graph


def _count_problems(plan: Plan, limits: PlanLimits) -> list[str]:
    if len(plan.nodes) <= limits.max_nodes:
        return []
    return [
        f"the plan has {len(plan.nodes)} nodes; the limit is {limits.max_nodes} ({limits.source})"
    ]


def _graph(plan: Plan, limits: PlanLimits) -> tuple[PlanGraph | None, list[str]]:
    """The plan's graph over its known dependencies, and its cycle or depth problem.

    Dependencies that are unknown, on the node itself or outside the plan are left out
    (the first two are reported by the structure checks); with duplicate ids there is
    no graph to speak of, and no problem is added for it here.
    """
    ids = {node.id for node in plan.nodes}
    if len(ids) != len(plan.nodes):
        return None, []
    nodes = [_with_deps_among(node, ids) for node in plan.nodes]
    order = topological_order(nodes)
    if isinstance(order, Cycle):
        return None, [order.describe()]
    depth = longest_chain(nodes, order)
    if limits.max_depth is not None and depth > limits.max_depth:
        # Dependencies left out only shorten chains: a chain too long here is too long.
        limit = limits.max_depth
        return None, [f"the longest dependency chain has {depth} nodes; the limit is {limit}"]
    return PlanGraph(plan=plan, dependents=dependents_of(nodes), topological_order=order), []


def _with_deps_among(node: Node, ids: set[str]) -> Node:
    """``node`` depending only on other nodes of ``ids``."""
    kept = [dep for dep in node.depends_on if dep in ids and dep != node.id]
    if len(kept) == len(node.depends_on):
        return node
    return node.model_copy(update={"depends_on": kept})


def longest_chain(nodes: list[Node], order: list[str]) -> int:
    """Nodes on the longest dependency chain (1 for a plan with no dependencies)."""
    deps = {node.id: node.depends_on for node in nodes}
    depth: dict[str, int] = {}
    for node_id in order:
        depth[node_id] = 1 + max((depth[dep] for dep in deps[node_id]), default=0)
    return max(depth.values(), default=0)


def _structure_problems(plan: Plan, run: RunContext) -> list[str]:
    ids = [node.id for node in plan.nodes]
    known = set(ids) | run.dependable
    problems = [
        f"node id {node_id!r} is used {count} times; ids must be unique"
        for node_id, count in Counter(ids).items()
        if count > 1
    ]
    problems += [
        f"node id {node_id!r} is reserved: ids starting with {INTERNAL_ID_PREFIX!r} are dagwright's"
        for node_id in ids
        if node_id.startswith(INTERNAL_ID_PREFIX)
    ]
    problems += [
        f"node id {node_id!r} is reserved: ids ending in [<n>] are a mapped node's children"
        for node_id in ids
        if node_id.endswith("]")
    ]
    problems += [
        f"node id {node_id!r} is already used in this run; choose another"
        for node_id in ids
        if node_id in run.taken
    ]
    problems += [
        f"node {node.id!r} sets run_if: {node.run_if} but has no depends_on: the rule is "
        "about how its dependencies ended; add depends_on or remove run_if"
        for node in plan.nodes
        if node.run_if != DEFAULT_RUN_IF and not node.depends_on
    ]
    suggest = _Suggestions(known)
    for node in plan.nodes:
        problems += [_dependency_problem(node, dep, known, run, suggest) for dep in node.depends_on]
    for output in plan.output_nodes():
        if output not in known:
            problems.append(
                f"output names {shown_id(output)!r}, which is not in the plan"
                + suggest.for_word(output)
            )
    return [problem for problem in problems if problem]


def _dependency_problem(
    node: Node, dep: str, known: set[str], run: RunContext, suggest: _Suggestions
) -> str:
    """What is wrong with ``node`` depending on ``dep`` ("": nothing)."""
    if dep == node.id:
        return f"node {node.id!r} depends on itself; remove {dep!r} from its depends_on"
    if dep in known:
        return ""
    if dep in run.taken:
        return (
            f"node {node.id!r} depends on {shown_id(dep)!r}, "
            "which failed or is being replaced: depend on the new nodes, or on the run's "
            "nodes that completed or still run"
        )
    return (
        f"node {node.id!r} depends on {shown_id(dep)!r}, which is not in the plan"
        + suggest.for_word(dep)
    )


def _node_problems(plan: Plan, catalog: WorkerCatalog, limits: PlanLimits) -> list[str]:
    allowed = catalog.type_names()
    registered = catalog.registered_type_names()
    problems: list[str] = []
    for node in plan.nodes:
        if node.timeout_s is not None and node.timeout_s > limits.max_timeout_s:
            problems.append(
                f"node {node.id!r} asks timeout_s {node.timeout_s:g}; the limit is "
                f"{limits.max_timeout_s:g} ({limits.timeout_source})"
            )
        problems += item_problems(node) + _map_bound_problems(node, limits)
        if node.type in allowed:
            # A mapped node's params that take its item are known per child: checked as
            # each child runs (a PermanentError naming them), not here.
            if node.map is None or not uses_item(node):
                problems += [f"node {node.id!r}: {p}" for p in catalog.node_problems(node)]
        elif node.type in registered:
            problems.append(
                f"node {node.id!r} has type {node.type!r}, which is not allowed in this run "
                f"(allowed: {', '.join(sorted(allowed))})"
            )
        else:
            hint = catalog.unknown_type_hint(node.type)
            problems.append(_unknown_type_problem(node, allowed, registered) + hint)
    return problems


def _map_bound_problems(node: Node, limits: PlanLimits) -> list[str]:
    if node.map is None or node.map.max_items is None:
        return []
    if node.map.max_items <= limits.max_map_items:
        return []
    return [
        f"node {node.id!r} asks map.max_items {node.map.max_items}; the limit is "
        f"{limits.max_map_items} (DAGWRIGHT_MAP_MAX_ITEMS)"
    ]


def _unknown_type_problem(node: Node, allowed: list[str], registered: list[str]) -> str:
    listed = "registered" if set(allowed) == set(registered) else "allowed in this run"
    return (
        f"node {node.id!r} has type {shown_id(node.type)!r}, which no worker type is "
        "registered as"
        + _did_you_mean(node.type, allowed)
        + f"; {listed}: {', '.join(sorted(allowed))}"
    )


class _Suggestions:
    """ "Did you mean" for the first few unknown names: each costs a pass over the known
    ones, and a plan naming thousands of unknown ids must not take minutes to refuse."""

    MAX_SUGGESTIONS = 20

    def __init__(self, known: Iterable[str]) -> None:
        self.known = list(known)
        self.left = self.MAX_SUGGESTIONS

    def for_word(self, word: str) -> str:
        if self.left <= 0:
            return ""
        self.left -= 1
        return _did_you_mean(word, self.known)


def _did_you_mean(word: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def dependents_of(nodes: list[Node]) -> dict[str, list[str]]:
    """node id -> ids of the nodes that depend on it, in plan order."""
    dependents: dict[str, list[str]] = {node.id: [] for node in nodes}
    for node in nodes:
        for dep in node.depends_on:
            dependents[dep].append(node.id)
    return dependents


@dataclass(frozen=True)
class Cycle:
    """Node ids around a dependency cycle, in execution order (each runs after the one before)."""

    path: list[str]

    def describe(self) -> str:
        ring = " -> ".join([*self.path, self.path[0]])
        return f"dependency cycle {ring}: remove one of these dependencies"


def topological_order(nodes: list[Node]) -> list[str] | Cycle:
    """Kahn's algorithm: an execution order, or one cycle if there is none.

    Iterative, so a 10,000-long chain does not hit the recursion limit.
    """
    remaining = {node.id: len(node.depends_on) for node in nodes}
    dependents = dependents_of(nodes)
    ready = deque(node_id for node_id, count in remaining.items() if count == 0)
    order: list[str] = []
    while ready:
        node_id = ready.popleft()
        order.append(node_id)
        for child in dependents[node_id]:
            remaining[child] -= 1
            if remaining[child] == 0:
                ready.append(child)
    if len(order) == len(nodes):
        return order
    return _find_cycle({node.id: node.depends_on for node in nodes}, set(order))


def _find_cycle(deps: dict[str, list[str]], ordered: set[str]) -> Cycle:
    # Every node Kahn left behind has a dependency that was also left behind, so walking
    # such dependencies must revisit a node: the walk from there is a cycle.
    start = min(node_id for node_id in deps if node_id not in ordered)
    seen: dict[str, int] = {}
    walk: list[str] = []
    node_id = start
    while node_id not in seen:
        seen[node_id] = len(walk)
        walk.append(node_id)
        node_id = next(dep for dep in deps[node_id] if dep not in ordered)
    cycle = list(reversed(walk[seen[node_id] :]))  # walked against the edges
    pivot = cycle.index(min(cycle))
    return Cycle(cycle[pivot:] + cycle[:pivot])
