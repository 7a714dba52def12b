"""What a planned plan may set: the planner's bounds on a node's operational knobs.

A plan the planner model writes is input from a model that may have read anything (a web
page, a document, an injected instruction), so what it may ask of the deployment is
bounded by settings (``settings.planner``): approvals, retry attempts and delays,
timeouts, how long the built-in ``sleep`` waits, and ``python`` code. Each breach is a
plan problem, one sentence saying what to fix, sent back to the model by the planner's
repair loop like any validation problem. Plans that people write (files, the builder,
``Client.submit(plan=...)``) are theirs to bound, and are not checked here.

Timeouts are bounded through the plan limits (``PlanRequest.limits``), so that a planned
node over both ``max_timeout_s`` and ``planner_max_timeout_s`` gets one problem, not two.
"""

from __future__ import annotations

from collections.abc import Iterable

from dagwright.models import Node, Plan, RetryPolicy
from dagwright.settings import PlannerSettings
from dagwright.workers.builtin_functions import sleep
from dagwright.workers.function_worker import FUNCTION_TYPE
from dagwright.workers.python import PYTHON_TYPE
from dagwright.workers.team_tasks import CELERY_TASK_TYPE

SLEEP_FUNCTION = sleep.__name__


def bounds_problems(plan: Plan, bounds: PlannerSettings) -> list[str]:
    """Every knob of ``plan`` set beyond ``bounds``, as sentences saying what to fix."""
    problems: list[str] = []
    for node in plan.nodes:
        problems += _node_bounds_problems(node, bounds)
    return problems


def _node_bounds_problems(node: Node, bounds: PlannerSettings) -> list[str]:
    problems = []
    if node.approval is not None and not bounds.allow_approvals:
        problems.append(
            f"node {node.id!r} sets `approval: {node.approval}`, which a planned node may not "
            "(DAGWRIGHT_PLANNER_ALLOW_APPROVALS): remove `approval`"
        )
    if node.retry is not None:
        problems += _retry_problems(node.id, node.retry, bounds)
    seconds = sleep_seconds(node)
    if seconds is not None and seconds > bounds.max_sleep_s:
        problems.append(
            f"node {node.id!r} sleeps {seconds:g} s; a planned node may sleep at most "
            f"{bounds.max_sleep_s:g} s (DAGWRIGHT_PLANNER_MAX_SLEEP_S): lower `params.seconds`"
        )
    return problems


def _retry_problems(node_id: str, retry: RetryPolicy, bounds: PlannerSettings) -> list[str]:
    problems = []
    if retry.max_attempts > bounds.max_attempts:
        problems.append(
            f"node {node_id!r} asks retry.max_attempts {retry.max_attempts}; a planned node "
            f"may have at most {bounds.max_attempts} (DAGWRIGHT_PLANNER_MAX_ATTEMPTS): lower it "
            "or leave `retry` unset"
        )
    delay = longest_retry_delay_s(retry)
    if delay > bounds.max_retry_delay_s:
        problems.append(
            f"node {node_id!r} would wait up to {delay:g} s between attempts; a planned node "
            f"may wait at most {bounds.max_retry_delay_s:g} s "
            "(DAGWRIGHT_PLANNER_MAX_RETRY_DELAY_S): lower retry.backoff_s and "
            "retry.backoff_max_s"
        )
    return problems


def longest_retry_delay_s(retry: RetryPolicy) -> float:
    """The longest delay between two attempts under ``retry`` (0 with one attempt): the
    delay after the next-to-last attempt, as ``compute_backoff`` grows it."""
    if retry.max_attempts < 2:
        return 0.0
    # The exponent is capped below a float's range (2.0 ** 1024 overflows); backoff_s may
    # be as small as a float goes, so no smaller cap is safe.
    growth = 2.0 ** min(retry.max_attempts - 2, 1000)
    return min(retry.backoff_max_s, retry.backoff_s * growth)


def sleep_seconds(node: Node) -> float | None:
    """How long ``node`` asks the built-in ``sleep`` to wait (None: it does not sleep, or
    its seconds are not a number, which the function's signature check reports)."""
    if node.type != FUNCTION_TYPE or node.function != SLEEP_FUNCTION:
        return None
    seconds = node.params.get("seconds", 1.0)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return None
    return float(seconds)


def planned_types(
    requested: list[str] | None, registered: Iterable[str], bounds: PlannerSettings
) -> list[str] | None:
    """The worker types a goal's plan may use: those the goal names (``-w``), else every
    registered one but ``python`` unless the settings allow model-written code, and
    never ``celery_task`` (a model would pick tasks of the team's app by name)."""
    if requested is not None:
        return requested
    kept_out = {CELERY_TASK_TYPE} if bounds.allow_python else {CELERY_TASK_TYPE, PYTHON_TYPE}
    return [name for name in registered if name not in kept_out]


def bounds_summary(bounds: PlannerSettings) -> str:
    """The bounds as the planner is told them, before it plans."""
    parts = [
        f"timeout_s at most {bounds.max_timeout_s:g}",
        f"retry.max_attempts at most {bounds.max_attempts}",
        f"retry delays at most {bounds.max_retry_delay_s:g} s",
        f"the sleep function's seconds at most {bounds.max_sleep_s:g}",
    ]
    if not bounds.allow_approvals:
        parts.insert(0, "no `approval`")
    return "Each node: " + "; ".join(parts) + "."
