"""The size limits of a plan: its goal, each node's params, and the whole plan as stored.

Checked for every plan (a file's, a caller's, the planner's) before anything serializes
it, and measured without expanding shared references (``json_shapes``): a plan that
passes is one whose JSON in Redis is within ``max_plan_bytes``.
"""

from __future__ import annotations

from dataclasses import dataclass

from dagwright.json_shapes import json_shape
from dagwright.models import Node, Plan
from dagwright.settings import Settings

# `"params":` and the comma before it
PARAMS_KEY_BYTES = len('"params":,')


def _default(setting: str) -> int:
    value: int = Settings.flat_field(setting).default
    return value


@dataclass(frozen=True)
class SizeLimits:
    """The largest goal (characters), node params and plan (bytes of JSON) accepted."""

    max_goal_chars: int = _default("max_goal_chars")
    max_params_bytes: int = _default("max_params_bytes")
    max_plan_bytes: int = _default("max_plan_bytes")

    @classmethod
    def of(cls, settings: Settings) -> SizeLimits:
        return cls(
            max_goal_chars=settings.planner.max_goal_chars,
            max_params_bytes=settings.limits.max_params_bytes,
            max_plan_bytes=settings.limits.max_plan_bytes,
        )


@dataclass(frozen=True)
class SizeCheck:
    """The size limits a plan passes, as sentences naming the setting.

    ``too_big`` says that the plan as a whole is over ``max_plan_bytes`` (or cannot be
    written as JSON): the other checks, whose cost grows with the plan, are not worth
    running on it. A node's params or the goal over their limits leave it readable.
    """

    problems: list[str]
    too_big: bool


def size_problems(plan: Plan, limits: SizeLimits) -> SizeCheck:
    """Every size limit the plan passes."""
    try:
        return _size_problems(plan, limits)
    except ValueError as exc:  # text no encoder takes (a lone surrogate), from a caller
        return SizeCheck([f"the plan {exc}"], too_big=True)


def _size_problems(plan: Plan, limits: SizeLimits) -> SizeCheck:
    problems = []
    if len(plan.goal) > limits.max_goal_chars:
        problems.append(
            f"the goal is {len(plan.goal)} characters; the limit is {limits.max_goal_chars} "
            "(DAGWRIGHT_MAX_GOAL_CHARS)"
        )
    total = json_shape(plan.goal).size_bytes
    for node in plan.nodes:
        params_bytes = json_shape(node.params).size_bytes
        if params_bytes > limits.max_params_bytes:
            problems.append(
                f"node {node.id!r} has {params_bytes} bytes of params; the limit is "
                f"{limits.max_params_bytes} (DAGWRIGHT_MAX_PARAMS_BYTES)"
            )
        total += params_bytes + node_bytes_without_params(node)
    if total > limits.max_plan_bytes:
        problems.append(
            f"the plan is {total} bytes as JSON; the limit is {limits.max_plan_bytes} "
            "(DAGWRIGHT_MAX_PLAN_BYTES)"
        )
    return SizeCheck(problems, too_big=total > limits.max_plan_bytes)


def node_bytes_without_params(node: Node) -> int:
    """The JSON size of a node's fields other than params (dumped: none can be large but
    ``code`` and ``instruction``, which are measured as they are)."""
    fields = node.model_dump(exclude={"params"}, exclude_defaults=True)
    return PARAMS_KEY_BYTES + json_shape(fields).size_bytes
