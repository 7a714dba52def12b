"""Goals: a goal's options and planning request, the planner node a goal run starts with,
the plan a planner answers (with the synthesis step), and planning without a run
(`dagwright plan`). Adding a planner's plan to its run, and re-planning a failed branch,
are the run's: ``orchestrator/execution/expansion.py`` and ``replanning.py``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from dagwright.errors import (
    ConfigurationError,
    InputError,
    LLMNotConfiguredError,
)
from dagwright.keys import Keys
from dagwright.llm import build_llm
from dagwright.models import (
    Budget,
    Node,
    Plan,
    Usage,
)
from dagwright.planning.planner import (
    PLAN_NODE_ID,
    PLANNER_TYPE,
    SYNTHESIS_TYPE,
    PlanRequest,
    needs_synthesis,
    run_planner,
    with_run_inputs,
)
from dagwright.plans.validation import PlanGraph
from dagwright.settings import Settings
from dagwright.workers import WorkerRegistry
from dagwright.workers.memory_services import MemoryServices
from dagwright.workers.signatures import describe_validation_error


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
    if len(goal) > settings.planner.max_goal_chars:
        raise InputError(
            f"the goal is {len(goal)} characters; the limit is {settings.planner.max_goal_chars} "
            "(DAGWRIGHT_MAX_GOAL_CHARS): put the details in --context or a plan file"
        )
    if len(options.context) > settings.planner.max_context_chars:
        raise InputError(
            f"the context is {len(options.context)} characters; the limit is "
            f"{settings.planner.max_context_chars} (DAGWRIGHT_MAX_CONTEXT_CHARS): give the agents "
            "the material as a file they read (a function node's output), not in every prompt"
        )
    if options.max_nodes and options.max_nodes > settings.limits.max_nodes:
        raise InputError(
            f"--max-nodes {options.max_nodes} is above the limit of any plan here, "
            f"{settings.limits.max_nodes} (DAGWRIGHT_MAX_NODES)"
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
        max_nodes=options.max_nodes or settings.planner.max_nodes,
        max_depth=options.max_depth or settings.planner.max_depth,
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


def plan_locally(
    settings: Settings, request: PlanRequest, registry: WorkerRegistry
) -> tuple[Plan, Usage]:
    """Plan a goal in this process, writing nothing: the plan (synthesis included) and
    what the planner's LLM calls used. ConfigurationError if no LLM endpoint is set:
    here, unlike on a worker, the one who can set it is the caller."""
    try:
        llm = build_llm(settings.llm, None, Keys(settings.redis.key_prefix))
    except LLMNotConfiguredError as exc:
        raise ConfigurationError(str(exc)) from exc
    services = MemoryServices(llm, run_budget=request.budget)  # no workspace when planning
    ctx = services.context(settings=settings, run_id="local", node_id=PLAN_NODE_ID)
    node = planner_graph(request).plan.nodes[0]
    plan = with_synthesis(planned_plan(run_planner(ctx, node, registry), request, settings))
    return plan, services.usage
