"""The plan language as the planner model is offered it: ``submit_plan``'s schema.

The planner writes a plan through a tool whose input schema is a plan's JSON Schema,
every field described (the plan models' docstrings, ``models.PLAN_MODEL_CONFIG``): that
schema is the model's whole manual of the per-node controls (``output_schema``, ``model``,
``tools``, ``max_tokens``, ``retry``, ``timeout_s``, ``run_if``).

A plan's run options (budget, timeout, response cache, inputs schema, webhooks, runs per
concurrency key, priority) are the submitter's to set, never a model's: no model output
picks where run data goes or how much the run may spend. They are not offered, and a plan
that sets one anyway is refused with a problem the model is told (``PlannedPlan``),
instead of being stripped in silence as before: a model that believes its budget holds
plans around it. A node's ``priority`` is dropped from a planned plan
(``goals.planned_plan``): its nodes run at their run's priority, so no model output puts
its work ahead of other runs'.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, model_validator

from dagwright.models import PLAN_MODEL_CONFIG, Plan

RUN_OPTIONS = (
    "budget",
    "timeout_s",
    "response_cache",
    "inputs",
    "webhooks",
    "concurrency",
    "priority",
    "memory",
)
"""Plan fields that set the run, not a node: the submitter's, never a planned plan's."""


def _without_run_options(schema: dict[str, Any]) -> None:
    for name in RUN_OPTIONS:
        schema.get("properties", {}).pop(name, None)
    schema["description"] = (
        "A plan: the nodes (subtasks) of a dependency graph, and which of them answer "
        "the goal. The run's budget, timeout and notifications are the submitter's, not "
        "part of a planned plan."
    )


class PlannedPlan(Plan):
    """A plan as the planner model writes it: a Plan without run options."""

    model_config = ConfigDict(**PLAN_MODEL_CONFIG, json_schema_extra=_without_run_options)

    @model_validator(mode="before")
    @classmethod
    def _no_run_options(cls, data: Any) -> Any:
        if isinstance(data, dict):
            found = [name for name in RUN_OPTIONS if _sets(data, name)]
            if found:
                names = ", ".join(f"`{name}`" for name in found)
                raise ValueError(
                    f"{names}: run options are the submitter's, a planned plan may not set "
                    "them; leave them out"
                )
        return data


def _sets(data: dict[str, Any], name: str) -> bool:
    """Whether ``data`` gives ``name`` a value other than its default (a dump of a
    planned plan, which writes every field, sets none)."""
    if name not in data:
        return False
    default = Plan.model_fields[name].get_default(call_default_factory=True)
    return bool(data[name] != default)
