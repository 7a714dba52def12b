"""Pure validation of a plan: no I/O, no Redis, the same for file, builder and LLM plans.

Every problem is a sentence that says what to fix; they are collected, not raised one by
one, so a person (or the planner model, later) sees them all at once.
"""

from __future__ import annotations

import difflib
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from dagwright.errors import PlanError
from dagwright.models import Node, Plan
from dagwright.plans.sizes import SizeLimits, size_problems
from dagwright.shown_ids import shown_id


class WorkerCatalog(Protocol):
    """What validation needs to know about the registered worker types."""

    def type_names(self) -> list[str]: ...

    def node_problems(self, node: Node) -> list[str]: ...


@dataclass(frozen=True)
class PlanLimits:
    max_nodes: int = 10_000
    max_timeout_s: float = 6 * 3600.0
    max_depth: int | None = None  # nodes on the longest dependency chain; None: no limit
    source: str = "DAGWRIGHT_MAX_NODES"  # where the size limit comes from, to say in errors
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

    With ``run``, the plan extends a running run: dependencies on its completed and open
    nodes are allowed (and left out of the graph returned: they cannot depend on new
    nodes, so no cycle goes through them), and its ids are taken.
    """
    run = run or RunContext()
    if len(plan.nodes) > limits.max_nodes:
        raise PlanError(
            [
                f"the plan has {len(plan.nodes)} nodes; the limit is {limits.max_nodes} "
                f"({limits.source})"
            ]
        )
    too_big = size_problems(plan, limits.sizes)
    if too_big:  # before anything else reads it: the rest could take as long as it is big
        raise PlanError(too_big)
    problems = _structure_problems(plan, run) + _node_problems(plan, catalog, limits)
    if problems:
        raise PlanError(problems)
    nodes = [_without_external_deps(node, run.dependable) for node in plan.nodes]
    order = topological_order(nodes)
    if isinstance(order, Cycle):
        raise PlanError([order.describe()])
    depth = longest_chain(nodes, order)
    if limits.max_depth is not None and depth > limits.max_depth:
        raise PlanError(
            [f"the longest dependency chain has {depth} nodes; the limit is {limits.max_depth}"]
        )
    return PlanGraph(plan=plan, dependents=dependents_of(nodes), topological_order=order)


def _without_external_deps(node: Node, external: frozenset[str]) -> Node:
    if not external.intersection(node.depends_on):
        return node
    return node.model_copy(update={"depends_on": [d for d in node.depends_on if d not in external]})


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
        f"node id {node_id!r} is already used in this run; choose another"
        for node_id in ids
        if node_id in run.taken
    ]
    for node in plan.nodes:
        for dep in node.depends_on:
            if dep == node.id:
                problems.append(
                    f"node {node.id!r} depends on itself; remove {dep!r} from its depends_on"
                )
            elif dep not in known and dep in run.taken:
                problems.append(
                    f"node {node.id!r} depends on {shown_id(dep)!r}, "
                    "which failed or is being replaced: depend on the new nodes, or on the run's "
                    "nodes that completed or still run"
                )
            elif dep not in known:
                problems.append(
                    f"node {node.id!r} depends on {shown_id(dep)!r}, which is not in the plan"
                    + _did_you_mean(dep, known)
                )
    for output in plan.output_nodes():
        if output not in known:
            problems.append(
                f"output names {shown_id(output)!r}, which is not in the plan"
                + _did_you_mean(output, known)
            )
    return problems


def _node_problems(plan: Plan, catalog: WorkerCatalog, limits: PlanLimits) -> list[str]:
    type_names = catalog.type_names()
    problems: list[str] = []
    for node in plan.nodes:
        if node.type not in type_names:
            problems.append(
                f"node {node.id!r} has type {shown_id(node.type)!r}, which no worker type is "
                "registered as"
                + _did_you_mean(node.type, type_names)
                + f"; registered: {', '.join(sorted(type_names))}"
            )
            continue
        if node.timeout_s is not None and node.timeout_s > limits.max_timeout_s:
            problems.append(
                f"node {node.id!r} asks timeout_s {node.timeout_s:g}; the limit is "
                f"{limits.max_timeout_s:g} (DAGWRIGHT_MAX_TIMEOUT_S)"
            )
        problems.extend(f"node {node.id!r}: {problem}" for problem in catalog.node_problems(node))
    return problems


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
