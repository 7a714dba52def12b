"""Starting a run, of a plan or of a goal: what the client and the schedules share."""

from __future__ import annotations

from dagwright.errors import InputError
from dagwright.models import Plan, RunStatus
from dagwright.orchestrator.broker import Broker, dispatch
from dagwright.orchestrator.dag import PlanGraph, PlanLimits, validate_plan
from dagwright.orchestrator.planning import GoalOptions, plan_request, planner_graph
from dagwright.orchestrator.runstore import new_run_id
from dagwright.orchestrator.runtime import Runtime
from dagwright.settings import Settings
from dagwright.workers import WorkerRegistry, default_registry, load_plugins


def check_plan(plan: Plan, settings: Settings, registry: WorkerRegistry | None = None) -> PlanGraph:
    """Validate a plan against the registered worker types and the limits, without Redis.

    Imports ``settings.imports`` first, so users' functions are known.
    """
    load_plugins(settings.imports)
    limits = PlanLimits(max_nodes=settings.max_nodes, max_timeout_s=settings.max_timeout_s)
    return validate_plan(plan, registry or default_registry, limits)


def start_run(
    runtime: Runtime,
    broker: Broker,
    *,
    plan: Plan | None = None,
    goal: str | None = None,
    options: GoalOptions | None = None,
    extra: dict[str, str | int] | None = None,
) -> str:
    """Write a new run and publish its first nodes; its id. PlanError (with every
    problem) or InputError before anything is written. ``extra``: more fields of the
    run's hash (a schedule's name, a follow-up's depth)."""
    options = options or GoalOptions()
    if (plan is None) == (goal is None):
        raise InputError("give either a plan or a goal")
    misplaced = [name for name in options.given() if name != "budget_tokens"]
    if plan is not None and misplaced:
        raise InputError(f"{', '.join(misplaced)} apply to a goal, not to a plan")
    run_id = new_run_id()
    fields: dict[str, str | int] = dict(extra or {})  # more fields of the run hash
    if options.budget_tokens:
        fields["budget_tokens"] = options.budget_tokens
    settings = runtime.settings
    if goal is not None:
        request = plan_request(settings, runtime.registry, goal, options)
        replan = settings.replan_enabled if options.replan is None else options.replan
        goal_fields: dict[str, str | int] = {
            "request": request.model_dump_json(),
            "replan_max": settings.replan_max if replan else 0,
            **fields,
        }
        ready = runtime.store.create_run(
            run_id,
            planner_graph(request),
            runtime.dispatch_for,
            status=RunStatus.PLANNING,
            output_nodes=[],
            extra=goal_fields,
        )
    else:
        assert plan is not None
        graph = check_plan(plan, settings, runtime.registry)
        ready = runtime.store.create_run(run_id, graph, runtime.dispatch_for, extra=fields)
    dispatch(broker, runtime.scheduler, ready)
    return run_id
