"""The models a run's nodes would call, and the refusal of a USD budget that cannot hold.

A USD budget is enforced before every LLM call at the call's price; a model missing from
``model_prices`` has none, so a run with a USD budget whose nodes would call one is
refused at submit (UnpricedModelError, one line saying what to do), not run uncounted.
A node's model is its own (``Node.model``), else its agent type's (``AgentSpec.model``),
else ``default_model``; a goal run's nodes are not known before planning, so the
planner's model and those of every agent type it may choose from are checked.
"""

from __future__ import annotations

from collections.abc import Iterable

from dagwright.errors import UnpricedModelError
from dagwright.llm.model_ids import unpriced
from dagwright.models import Budget, Plan
from dagwright.settings import Settings
from dagwright.workers.registry import WorkerRegistry, WorkerType

AGENT_KIND = "agent"


def agent_model(worker_type: WorkerType, settings: Settings) -> str | None:
    """The model nodes of ``worker_type`` call; None if it is no agent type."""
    if worker_type.kind != AGENT_KIND:
        return None
    return worker_type.model or settings.llm.default_model


def models_of_types(types: Iterable[WorkerType], settings: Settings) -> dict[str, str]:
    """The model of each agent type among ``types``, by type name."""
    models = {wt.name: agent_model(wt, settings) for wt in types}
    return {name: model for name, model in models.items() if model is not None}


def models_of_plan(plan: Plan, registry: WorkerRegistry, settings: Settings) -> dict[str, str]:
    """The model of each agent type ``plan``'s nodes use, by type name, and of each
    agent node that names its own (``node <id>``)."""
    used = {node.type: registry.get(node.type) for node in plan.nodes}
    own = {
        f"node {node.id}": node.model
        for node in plan.nodes
        if node.model is not None and agent_model(used[node.type], settings) is not None
    }
    return {**models_of_types(used.values(), settings), **own}


def models_of_goal(
    registry: WorkerRegistry, settings: Settings, worker_types: list[str] | None
) -> dict[str, str]:
    """The planner's model and those of the agent types a plan of the goal may use."""
    allowed = [wt for wt in registry.types() if worker_types is None or wt.name in worker_types]
    planner = settings.planner.model or settings.llm.default_model
    return {"planner": planner, **models_of_types(allowed, settings)}


def check_usd_budget_is_priced(
    budget: Budget | None, models_by_user: dict[str, str], settings: Settings
) -> None:
    """UnpricedModelError if ``budget`` limits USD and a model in ``models_by_user`` (by
    the type or role that uses it) has no price."""
    if budget is None or budget.max_cost_usd is None:
        return
    missing = unpriced(set(models_by_user.values()), settings.llm.model_prices)
    if not missing:
        return
    users = sorted(user for user, model in models_by_user.items() if model in missing)
    raise UnpricedModelError(
        f"the run's USD budget cannot be counted: {', '.join(missing)} (used by "
        f"{', '.join(users)}) has no price in model_prices; add its USD per million tokens "
        "to model_prices (dagwright.toml or DAGWRIGHT_MODEL_PRICES), or budget tokens "
        "(--budget-tokens) instead"
    )
