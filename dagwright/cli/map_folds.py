"""A mapped node's children shown as one row (``status``, ``watch``):
``research[0..11]  9 succeeded, 3 running``, right after the mapped node.

A map may spawn a thousand children; listed one a row they would push the rest of the
run off the screen, and what a person wants of them is how many are where. The first
failed child is named with its error (the dead letter to replay).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dagwright.models import NodeState, NodeStatus
from dagwright.plans.mapping import parent_of

# The state a folded row sorts by when not all rows fit: the most urgent of its children.
URGENCY = (
    NodeStatus.FAILED,
    NodeStatus.RUNNING,
    NodeStatus.WAITING_APPROVAL,
    NodeStatus.RETRY_WAIT,
    NodeStatus.QUEUED,
    NodeStatus.BLOCKED,
    NodeStatus.CANCELLED,
    NodeStatus.PENDING,
    NodeStatus.SUCCEEDED,
    NodeStatus.SKIPPED,
    NodeStatus.REPLACED,
)


@dataclass(frozen=True)
class Fold:
    """The children of one mapped node, in their items' order."""

    parent: str
    children: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.parent}[0..{len(self.children) - 1}]"

    def counts(self, nodes: Mapping[str, NodeState]) -> Counter[str]:
        return Counter(nodes[child].status.value for child in self.children)

    def summary(self, nodes: Mapping[str, NodeState]) -> str:
        """``9 succeeded, 3 running``."""
        counted = self.counts(nodes).most_common()
        return ", ".join(f"{count} {status}" for status, count in counted)

    def status(self, nodes: Mapping[str, NodeState]) -> NodeStatus:
        """The most urgent state among the children."""
        present = {nodes[child].status for child in self.children}
        return next(state for state in URGENCY if state in present)

    def first_failed(self, nodes: Mapping[str, NodeState]) -> str | None:
        return next((c for c in self.children if nodes[c].status == NodeStatus.FAILED), None)


def folds_of(nodes: Mapping[str, NodeState]) -> dict[str, Fold]:
    """Each mapped node's children, by the fold's label."""
    found: dict[str, list[tuple[int, str]]] = {}
    for node_id in nodes:
        child = parent_of(node_id)
        if child is not None and child[0] in nodes:
            found.setdefault(child[0], []).append((child[1], node_id))
    folds = [Fold(parent, tuple(c for _, c in sorted(kids))) for parent, kids in found.items()]
    return {fold.label: fold for fold in folds}


def folded(order: Iterable[str], folds: Mapping[str, Fold]) -> list[str]:
    """``order`` with each map's children replaced by its fold, right after the map."""
    after = {fold.parent: label for label, fold in folds.items()}
    rows: list[str] = []
    for node_id in order:
        child = parent_of(node_id)
        if node_id in after:
            rows += [node_id, after[node_id]]
        elif child is None or child[0] not in after:
            rows.append(node_id)
    return rows
