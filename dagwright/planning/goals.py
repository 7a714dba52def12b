"""Planned runs: the planner node of a goal, the expansion of its plan into the run, the
synthesis step, re-planning a failed branch, and planning without a run (`dagwright plan`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from dagwright.errors import (
    ConfigurationError,
    InputError,
    LLMNotConfiguredError,
    PermanentError,
    PlanError,
)
from dagwright.keys import Keys
from dagwright.llm import build_llm
from dagwright.models import (
    BLOCKED_BY_A_FAILURE,
    DEFAULT_PRIORITY,
    Budget,
    Node,
    NodeStatus,
    Plan,
    Usage,
)
from dagwright.orchestrator.runstate.creation import PRIORITY_FIELD
from dagwright.orchestrator.runstate.machine import (
    REPLAN_ID_PLACEHOLDER,
    Advance,
    NewNode,
    Replanner,
)
from dagwright.planning.planner import (
    PLAN_NODE_ID,
    PLANNER_TYPE,
    REPLAN_NODE_PREFIX,
    SYNTHESIS_TYPE,
    PlanRequest,
    needs_synthesis,
    run_planner,
    with_run_inputs,
)
from dagwright.plans.validation import PlanGraph, validate_plan
from dagwright.settings import Settings
from dagwright.testing.memory import MemoryServices
from dagwright.workers import NodeContext, WorkerRegistry
from dagwright.workers.signatures import describe_validation_error

if TYPE_CHECKING:  # a caller passes it in: the runtime sits above planning
    from dagwright.orchestrator.runtime import Runtime


@dataclass(frozen=True, kw_only=True)
class GoalOptions:
    """How a goal is to be planned and run (all optional, by keyword)."""

    context: str = ""
    worker_types: list[str] | None = None
    max_nodes: int | None = None
    max_depth: int | None = None
    replan: bool | None = None
    budget: Budget | None = None
    """The run's budget (plans too: a plan's own ``budget`` is overridden limit by limit)."""

    def goal_only(self) -> list[str]:
        """The names of the options set that only a goal uses (a budget fits plans too)."""
        return [
            field.name
            for field in dataclasses.fields(self)
            if field.name != "budget" and getattr(self, field.name) not in (None, "", [])
        ]


def requested_budget(
    budget: Budget | dict[str, Any] | None, budget_tokens: int | None = None
) -> Budget | None:
    """A run's budget as a caller gives it (``budget_tokens``: its total tokens, for short);
    InputError saying what is wrong with it."""
    try:
        given = Budget.model_validate(budget) if isinstance(budget, dict) else budget
        if budget_tokens is not None:
            tokens = Budget(max_total_tokens=budget_tokens)
            if given is not None and given.max_total_tokens not in (None, budget_tokens):
                raise InputError("budget_tokens and budget.max_total_tokens differ: give one")
            given = tokens.overridden_by(given)
    except ValidationError as exc:
        raise InputError(f"invalid budget: {describe_validation_error(exc, 'budget')}") from None
    return given if given is not None and given.is_set else None


def plan_request(
    settings: Settings,
    registry: WorkerRegistry,
    goal: str,
    options: GoalOptions,
    inputs: dict[str, Any] | None = None,
) -> PlanRequest:
    """A planning request, or InputError saying what is wrong with it. ``inputs``: the
    run's, checked already, which its plan may use."""
    goal = goal.strip()
    if not goal:
        raise InputError("the goal is empty: say what the run must achieve")
    if len(goal) > settings.max_goal_chars:
        raise InputError(
            f"the goal is {len(goal)} characters; the limit is {settings.max_goal_chars} "
            "(DAGWRIGHT_MAX_GOAL_CHARS): put the details in --context or a plan file"
        )
    if len(options.context) > settings.max_context_chars:
        raise InputError(
            f"the context is {len(options.context)} characters; the limit is "
            f"{settings.max_context_chars} (DAGWRIGHT_MAX_CONTEXT_CHARS): give the agents "
            "the material as a file they read (a function node's output), not in every prompt"
        )
    if options.max_nodes and options.max_nodes > settings.max_nodes:
        raise InputError(
            f"--max-nodes {options.max_nodes} is above the limit of any plan here, "
            f"{settings.max_nodes} (DAGWRIGHT_MAX_NODES)"
        )
    unknown = sorted(set(options.worker_types or []) - set(registry.type_names()))
    if unknown:
        raise InputError(
            f"unknown worker type(s) {', '.join(unknown)}; registered: "
            f"{', '.join(registry.type_names())}"
        )
    return PlanRequest(
        goal=goal,
        context=options.context,
        worker_types=options.worker_types or None,
        max_nodes=options.max_nodes or settings.planner_max_nodes,
        max_depth=options.max_depth or settings.planner_max_depth,
        budget=options.budget,
        inputs=inputs or None,
    )


def planner_graph(request: PlanRequest, priority: int | None = None) -> PlanGraph:
    """The graph a goal run starts with: one planner node, at the run's ``priority``
    (which the nodes it plans inherit)."""
    node = Node(
        id=PLAN_NODE_ID,
        type=PLANNER_TYPE,
        params=request.model_dump(exclude_defaults=True),
        priority=priority,
    )
    plan = Plan(goal=request.goal, output=[], nodes=[node])
    return PlanGraph(plan=plan, dependents={PLAN_NODE_ID: []}, topological_order=[PLAN_NODE_ID])


def planned_plan(output: Any, request: PlanRequest, settings: Settings) -> Plan:
    """A planner's plan, without run options of its own (the run's are the submitter's:
    budget, response cache, webhooks — no model output picks where run data goes — and
    its nodes run at the run's priority), with the run's inputs in its templates."""
    plan = Plan.model_validate(output)
    nodes = [node.model_copy(update={"priority": None}) for node in plan.nodes]
    plan = plan.model_copy(
        update={
            "budget": None,
            "response_cache": False,
            "webhooks": [],
            "memory": None,
            "nodes": nodes,
        }
    )
    return with_run_inputs(plan, request, settings)


def with_synthesis(plan: Plan) -> Plan:
    """A plan as it will run: one naming its output, or ending in one node, as it is; else
    a writer combining its sinks is appended. The writer is told the run's goal and context
    as instructions, as every agent node is."""
    if not needs_synthesis(plan):
        return plan
    ids = {node.id for node in plan.nodes}
    synthesis_id = next(
        f"synthesis{s}" for s in ("", *map(str, range(2, 100))) if f"synthesis{s}" not in ids
    )
    synthesis = Node(
        id=synthesis_id,
        type=SYNTHESIS_TYPE,
        instruction=(
            "Combine the results of the tasks before you into one final answer to the run's "
            "goal, for the person who set it, keeping every requirement of their goal and "
            "context (language, length, format, audience)."
        ),
        depends_on=plan.output_nodes(),
    )
    return plan.model_copy(update={"output": synthesis_id, "nodes": [*plan.nodes, synthesis]})


@dataclass(frozen=True)
class Expansion:
    """A planner's accepted plan, ready to be added to its run."""

    output_json: str
    new_nodes: list[NewNode]
    output_nodes: list[str] | None
    replaced: list[str]


def prepare_expansion(runtime: Runtime, ctx: NodeContext, node: Node, output: Any) -> Expansion:
    """The nodes planner ``node``'s output adds to the run (PermanentError if it is not a
    valid plan: the planner checked it, so this is a safety net)."""
    request = PlanRequest.model_validate(node.params)
    try:
        plan = planned_plan(output, request, runtime.settings)
    except PlanError as exc:
        raise PermanentError(f"the planner's plan cannot be added: {exc}") from exc
    limits = request.limits(runtime.settings)
    if not request.is_replan:
        plan = with_synthesis(plan)
        limits = dataclasses.replace(  # room for the synthesis step
            limits, max_nodes=limits.max_nodes + 1, max_depth=(limits.max_depth or 0) + 1
        )
    try:
        graph = validate_plan(plan, runtime.registry, limits, request.run_context())
    except PlanError as exc:
        raise PermanentError(f"the planner's plan cannot be added: {exc}") from exc
    new_nodes = [
        NewNode(
            id=planned.id,
            spec_json=planned.model_dump_json(exclude_defaults=True),
            deps=planned.depends_on,
            dependents=graph.dependents[planned.id],
            dispatch=runtime.dispatch_for(planned, node.priority or DEFAULT_PRIORITY),
        )
        for planned in plan.nodes
    ]
    return Expansion(
        output_json=plan.model_dump_json(exclude_defaults=True),  # the plan as it will run
        new_nodes=new_nodes,
        output_nodes=new_outputs(request, plan),
        replaced=request.replaced_ids,
    )


def apply_expansion(runtime: Runtime, ctx: NodeContext, expansion: Expansion) -> Advance | None:
    """Complete the planner node by adding the nodes, atomically (None: it is not ours)."""
    return runtime.machine.expand(
        ctx.run_id,
        ctx.node_id,
        ctx.fence,
        output_json=expansion.output_json,
        new_nodes=expansion.new_nodes,
        output_nodes=expansion.output_nodes,
        replaced=expansion.replaced,
    )


def new_outputs(request: PlanRequest, plan: Plan) -> list[str] | None:
    """The run's output nodes after this plan (None: unchanged)."""
    if not request.is_replan:
        return plan.output_nodes()
    replaced = set(request.replaced_ids)
    if not replaced & set(request.run_outputs):
        return None
    kept = [node for node in request.run_outputs if node not in replaced]
    return kept + [node for node in plan.output_nodes() if node not in kept]


def replanner_for(runtime: Runtime, run_id: str, failed: Node, error: str) -> Replanner | None:
    """A re-planner for the branch of ``failed``, if the run re-plans (fail.lua checks the
    count again, atomically, and names it)."""
    if failed.id.startswith("_") or failed.type == PLANNER_TYPE:
        return None
    if failed.map is not None:  # a map or its child: replayed from the DLQ, not re-planned
        return None
    keys, client = runtime.keys, runtime.client
    run = client.hgetall(keys.run_key(run_id, "run"))
    if "request" not in run or int(run.get("replans", 0)) >= int(run.get("replan_max", 0)):
        return None
    states = client.hgetall(keys.run_key(run_id, "state"))
    columns = ("dependents", "deps")
    dependents, deps = (
        {k: json.loads(v) for k, v in client.hgetall(keys.run_key(run_id, c)).items()}
        for c in columns
    )
    # Handlers (nodes with a run_if rule) are not in the branch: the failure does not
    # block them, it is what they run for (and it is not replaced before they run). A
    # none_failed node is blocked by it, as a plain node is: it is in the branch.
    rules = client.hgetall(keys.run_key(run_id, "run_if"))
    handlers = {node for node, rule in rules.items() if rule not in BLOCKED_BY_A_FAILURE}
    branch = [failed.id, *pending_descendants(failed.id, dependents, states, handlers)]
    mine = [node for node in states if not node.startswith("_")]
    completed = [node for node in mine if states[node] == NodeStatus.SUCCEEDED.value]
    used = sorted({dep for node in branch for dep in deps.get(node, []) if dep in completed})
    request = PlanRequest.model_validate_json(run["request"]).model_copy(
        update={
            "failed_node": failed.id,
            "error": error,
            "replace": [
                json.loads(s) for s in client.hmget(keys.run_key(run_id, "spec"), branch) if s
            ],
            "taken": sorted(states),
            "completed": sorted(completed),
            "open": sorted(
                n for n in mine if n not in branch and not NodeStatus(states[n]).is_final
            ),
            "run_outputs": json.loads(run["output_nodes"]),
        }
    )
    # It depends on the completed nodes the branch used: their outputs reach it as inputs.
    template = Node(
        id=REPLAN_ID_PLACEHOLDER,
        type=PLANNER_TYPE,
        params=request.model_dump(exclude_defaults=True),
        depends_on=used,
        priority=run_priority(run),
    )
    return Replanner(
        id_prefix=REPLAN_NODE_PREFIX,
        spec_template=template.model_dump_json(exclude_defaults=True),
        dispatch=runtime.dispatch_for(template),
    )


def run_priority(run: dict[str, str]) -> int:
    """The run's priority, from its hash (the default for runs created before it)."""
    return int(run.get(PRIORITY_FIELD, DEFAULT_PRIORITY))


def pending_descendants(
    node: str,
    dependents: dict[str, list[str]],
    states: dict[str, str],
    handlers: frozenset[str] | set[str] = frozenset(),
) -> list[str]:
    """The pending nodes after ``node``, not through ``handlers`` (nor them)."""
    found: list[str] = []
    stack = list(dependents.get(node, []))
    while stack:
        child = stack.pop()
        if child in handlers:
            continue
        if child not in found and states.get(child) == NodeStatus.PENDING.value:
            found.append(child)
            stack.extend(dependents.get(child, []))
    return found


def plan_locally(
    settings: Settings, request: PlanRequest, registry: WorkerRegistry
) -> tuple[Plan, Usage]:
    """Plan a goal in this process, writing nothing: the plan (synthesis included) and
    what the planner's LLM calls used. ConfigurationError if no LLM endpoint is set:
    here, unlike on a worker, the one who can set it is the caller."""
    try:
        llm = build_llm(settings.llm, None, Keys(settings.key_prefix))
    except LLMNotConfiguredError as exc:
        raise ConfigurationError(str(exc)) from exc
    services = MemoryServices(llm, run_budget=request.budget)  # no workspace when planning
    ctx = services.context(settings=settings, run_id="local", node_id=PLAN_NODE_ID)
    node = planner_graph(request).plan.nodes[0]
    plan = with_synthesis(planned_plan(run_planner(ctx, node, registry), request, settings))
    return plan, services.usage
