"""Deny-by-default tool policies: an ordered list of rules, the first match wins.

A rule names a tool (a glob: ``workspace_*``, ``*``), an action (allow, deny,
require_approval) and optionally ``when``: argument values the call must match (globs
against the argument's text, e.g. ``{"url": "https://docs.python.org/*"}``). A call no
rule matches is denied.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class PolicyAction(enum.StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    REQUIRE_APPROVAL = "require_approval"


class PolicyRule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str = "*"
    """Tool name, or a glob of tool names."""
    action: PolicyAction
    when: dict[str, str] = Field(default_factory=dict)
    """Argument name -> glob its value must match (all of them)."""
    reason: str = ""
    """Why: shown to the model when the call is refused, and audited."""

    def matches(self, tool: str, args: dict[str, Any]) -> bool:
        if not fnmatchcase(tool, self.tool):
            return False
        return all(
            name in args and fnmatchcase(argument_text(args[name]), pattern)
            for name, pattern in self.when.items()
        )


def argument_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


@dataclass(frozen=True)
class PolicyDecision:
    action: PolicyAction
    rule: int | None  # index of the matching rule; None: no rule matched (default deny)
    reason: str


class ToolPolicy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rules: list[PolicyRule] = Field(default_factory=list)

    def decide(self, tool: str, args: dict[str, Any]) -> PolicyDecision:
        for index, rule in enumerate(self.rules):
            if rule.matches(tool, args):
                return PolicyDecision(rule.action, index, rule.reason)
        return PolicyDecision(PolicyAction.DENY, None, "no rule allows this call (deny by default)")

    @classmethod
    def allowing(cls, *tools: str) -> ToolPolicy:
        """A policy that allows exactly these tools, with any arguments."""
        return cls(rules=[PolicyRule(tool=tool, action=PolicyAction.ALLOW) for tool in tools])
