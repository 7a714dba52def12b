"""A plan for a goal without a run: what ``dagwright plan`` shows."""

from __future__ import annotations

from dataclasses import dataclass

from dagwright.models import Plan, Usage
from dagwright.planning.goals import GoalOptions, plan_locally, plan_request
from dagwright.registry import build_registry
from dagwright.settings import Settings


@dataclass(frozen=True)
class PlannedGoal:
    """A plan made for a goal without running it, and what planning it cost."""

    plan: Plan
    usage: Usage


def plan_goal(
    goal: str, settings: Settings | None = None, options: GoalOptions | None = None
) -> PlannedGoal:
    """Ask the planner for a plan, in this process, without Redis and without a run: what
    ``dagwright plan`` shows. Raises InputError or PlanningFailedError."""
    settings = settings or Settings()
    registry = build_registry(settings)
    request = plan_request(settings, registry, goal, options or GoalOptions())
    plan, usage = plan_locally(settings, request, registry)
    return PlannedGoal(plan=plan, usage=usage)
