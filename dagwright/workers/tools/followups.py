"""The ``propose_followup`` tool: an agent of a scheduled run asks for another run."""

from __future__ import annotations

from dagwright.errors import ScheduleError, ToolError
from dagwright.workers.context import NodeContext


def propose_followup(ctx: NodeContext, goal: str, reason: str = "") -> str:
    """Propose a follow-up goal to run next, as a run of its own (only in runs a schedule
    started, and only as many as it allows): say what to do and why.

    Args:
        goal: What the follow-up run should achieve, as a goal a planner can act on.
        reason: Why it is worth a run of its own, for the person reviewing it.
    """
    try:
        return ctx.propose_followup(goal, reason)
    except ScheduleError as exc:  # not allowed: the model's answer, not a broken tool
        raise ToolError(str(exc)) from exc
