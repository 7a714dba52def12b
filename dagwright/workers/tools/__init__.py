"""Tools for agents: typed, time-limited, truncated, and behind a deny-by-default policy."""

from dagwright.workers.tools.base import Tool, ToolOutcome, ToolRegistry
from dagwright.workers.tools.policy import PolicyAction, PolicyDecision, PolicyRule, ToolPolicy

__all__ = [
    "PolicyAction",
    "PolicyDecision",
    "PolicyRule",
    "Tool",
    "ToolOutcome",
    "ToolPolicy",
    "ToolRegistry",
]
