"""What re-planning a failed branch reads of its run, decoded from the run's hashes.

The store reads it (``RunStore.replan_reading``) so that the code deciding the branch
never names a hash; fail.lua checks the re-plan count again, atomically, when it acts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from dagwright.models import DEFAULT_PRIORITY, NodeStatus
from dagwright.orchestrator.runstate.creation import PRIORITY_FIELD

REPLAN_COLUMNS = ("state", "dependents", "deps", "run_if")
"""The run's per-node hashes a re-plan reads, in the order ``replan_reading_of`` takes them."""


@dataclass(frozen=True, kw_only=True)
class ReplanReading:
    """A goal run that may still re-plan, as its hashes hold it at one instant."""

    request_json: str
    """The run's planning request (goal, context, options) as JSON."""
    output_nodes: list[str]
    priority: int
    states: dict[str, str]
    """Every node's status value, by node id (the run's own nodes start with "_")."""
    dependents: dict[str, list[str]]
    deps: dict[str, list[str]]
    run_if: dict[str, str]
    """The rule of each node that has one."""

    def pending_after(self, node: str, skip: frozenset[str] | set[str] = frozenset()) -> list[str]:
        """The pending nodes after ``node``, not through ``skip`` (nor them)."""
        found: list[str] = []
        stack = list(self.dependents.get(node, []))
        while stack:
            child = stack.pop()
            if child in skip:
                continue
            if child not in found and self.states.get(child) == NodeStatus.PENDING.value:
                found.append(child)
                stack.extend(self.dependents.get(child, []))
        return found


def replans_left(run: dict[str, str]) -> bool:
    """Whether the run (its hash) is a goal run with re-plans left."""
    return "request" in run and int(run.get("replans", 0)) < int(run.get("replan_max", 0))


def replan_reading_of(run: dict[str, str], columns: list[dict[str, str]]) -> ReplanReading:
    """The reading from the run's hash and its ``REPLAN_COLUMNS`` hashes, in that order."""
    states, dependents, deps, run_if = columns
    return ReplanReading(
        request_json=run["request"],
        output_nodes=json.loads(run.get("output_nodes") or "[]"),
        priority=int(run.get(PRIORITY_FIELD, DEFAULT_PRIORITY)),  # older runs: the default
        states=states,
        dependents={node: json.loads(value) for node, value in dependents.items()},
        deps={node: json.loads(value) for node, value in deps.items()},
        run_if=run_if,
    )
