"""A plan for a goal without a run: what ``dagwright plan`` shows."""

from __future__ import annotations

from dataclasses import dataclass

from dagwright.models import Plan, Usage
from dagwright.planning.goals import GoalOptions, plan_locally, plan_request
from dagwright.settings import Settings
from dagwright.workers import default_registry, load_plugins


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
    load_plugins(settings.imports)
    request = plan_request(settings, default_registry, goal, options or GoalOptions())
    plan, usage = plan_locally(settings, request)
    return PlannedGoal(plan=plan, usage=usage)
