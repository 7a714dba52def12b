"""A goal's planner node, finished: its plan checked and added to the run it planned,
atomically, in place of the planner (or of the failed branch it re-planned)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from dagwright.errors import PermanentError, PlanError
from dagwright.models import DEFAULT_PRIORITY, Node, Plan
from dagwright.orchestrator.runstate.machine import Advance, NewNode
from dagwright.orchestrator.runtime import Runtime
from dagwright.planning.goals import planned_plan, with_synthesis
from dagwright.planning.planner import PlanRequest
from dagwright.plans.validation import validate_plan
from dagwright.workers import NodeContext


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
