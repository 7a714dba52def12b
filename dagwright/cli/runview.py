"""The table ``dagwright watch`` draws: a run's header and one row per node, in dependency
order, cut to fit the terminal.

A big run does not fit on one screen, so the rows are chosen by what needs an eye
(running, waiting, failed nodes, then what is next, then what finished last) and drawn in
dependency order; the rest is summed up in one line. Durations of running nodes are
computed at each redraw, so the view stays live between two reads of the run.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from dagwright.cli.map_folds import Fold, folded, folds_of
from dagwright.cli.output import cost, styled_status
from dagwright.models import NodeState, NodeStatus, RunState

HEADER_LINES = 2  # the run line and the counts line
TABLE_CHROME_LINES = 2  # the column headings and the "… more" line
MIN_ROWS = 5  # shown even on a tiny terminal (it scrolls rather than showing nothing)
MAX_INDENT = 6  # dependency levels shown by indentation; deeper ones stay at this one
NEEDS_SHOWN = 2  # dependencies named in the "needs" column, the others counted
APPROVAL_HINTS = 3  # waiting nodes named with the approve command

# Which rows to keep when not all fit, lower first: what needs an eye, then what just
# finished (the most recent first), then what comes next.
ROW_PRIORITY = {
    NodeStatus.RUNNING: 0,
    NodeStatus.WAITING_APPROVAL: 0,
    NodeStatus.FAILED: 0,
    NodeStatus.RETRY_WAIT: 1,
    NodeStatus.BLOCKED: 2,
    NodeStatus.CANCELLED: 2,
    NodeStatus.SUCCEEDED: 3,
    NodeStatus.SKIPPED: 3,
    NodeStatus.REPLACED: 3,
    NodeStatus.QUEUED: 4,
    NodeStatus.PENDING: 5,
}


def dependency_levels(deps: dict[str, list[str]]) -> dict[str, int]:
    """node -> its level: 0 for a root, else one more than its deepest dependency.

    Kahn's algorithm over the run's dependencies, iterative so a long chain costs no
    recursion; a dependency the run does not hold counts as a root.
    """
    remaining = {node: sum(dep in deps for dep in node_deps) for node, node_deps in deps.items()}
    dependents: dict[str, list[str]] = {node: [] for node in deps}
    for node, node_deps in deps.items():
        for dep in node_deps:
            if dep in dependents:
                dependents[dep].append(node)
    level = dict.fromkeys(deps, 0)
    ready = [node for node, count in remaining.items() if count == 0]
    while ready:
        node = ready.pop()
        for dependent in dependents[node]:
            level[dependent] = max(level[dependent], level[node] + 1)
            remaining[dependent] -= 1
            if remaining[dependent] == 0:
                ready.append(dependent)
    return level


def dependency_order(node_ids: Iterable[str], levels: dict[str, int]) -> list[str]:
    """The nodes by level, each level in the order the run holds them (the plan's)."""
    ids = list(node_ids)
    position = {node_id: index for index, node_id in enumerate(ids)}
    return sorted(ids, key=lambda node_id: (levels.get(node_id, 0), position[node_id]))


def rows_that_fit(
    state: RunState, order: list[str], room: int, folds: dict[str, Fold] | None = None
) -> tuple[list[str], Counter[str]]:
    """The nodes to draw (in ``order``, which may hold the ``folds`` of mapped nodes'
    children) when ``room`` rows are free, and the states of those left out, counted."""
    if len(order) <= room:
        return order, Counter()
    folds = folds or {}
    position = {node_id: index for index, node_id in enumerate(order)}

    def urgency(node_id: str) -> tuple[int, float, int]:
        if node_id in folds:
            return ROW_PRIORITY.get(folds[node_id].status(state.nodes), 5), 0.0, position[node_id]
        node = state.nodes[node_id]
        finished = -node.finished_at.timestamp() if node.finished_at else 0.0
        return ROW_PRIORITY.get(node.status, 5), finished, position[node_id]

    kept = set(sorted(order, key=urgency)[: max(room, 0)])
    left_out: Counter[str] = Counter()
    for node_id in (n for n in order if n not in kept):
        if node_id in folds:
            left_out.update(folds[node_id].counts(state.nodes))
        else:
            left_out[state.nodes[node_id].status.value] += 1
    return [node_id for node_id in order if node_id in kept], left_out


def seconds_between(start: datetime | None, end: datetime | None, now: float) -> float | None:
    """Seconds from ``start`` to ``end`` (or to ``now`` while it goes on); clocks of
    other hosts may run ahead, so never below zero."""
    if start is None:
        return None
    stop = end.timestamp() if end else now
    return max(0.0, stop - start.timestamp())


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{rest:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def needs(node_deps: list[str]) -> str:
    shown = ", ".join(node_deps[:NEEDS_SHOWN])
    more = len(node_deps) - NEEDS_SHOWN
    return f"{shown} +{more}" if more > 0 else shown


def tokens(count: int, node: NodeState) -> str:
    return f"{count:,}" if node.usage.llm_calls else ""


@dataclass(frozen=True)
class Snapshot:
    """One read of the run, with what every redraw of it needs computed once: a redraw
    of a 10,000-node run then formats only the rows on screen."""

    state: RunState
    deps: dict[str, list[str]]
    levels: dict[str, int]
    order: list[str]
    waiting: list[str]  # nodes waiting for approval
    parked: list[str] = field(default_factory=list)  # nodes waiting on something (a breaker)
    fits: dict[int, tuple[list[str], Counter[str]]] = field(default_factory=dict)
    folds: dict[str, Fold] = field(default_factory=dict)  # mapped nodes' children, by label

    @classmethod
    def of(cls, state: RunState, earlier: Snapshot | None = None) -> Snapshot:
        """``earlier``: the previous read, whose levels serve again if no node was added
        (the dependencies of a node never change; a planner only adds nodes)."""
        if earlier is not None and len(earlier.levels) == len(state.nodes):
            deps, levels = earlier.deps, earlier.levels
        else:
            deps = {node_id: node.depends_on for node_id, node in state.nodes.items()}
            levels = dependency_levels(deps)
        waiting = [
            node_id
            for node_id, node in state.nodes.items()
            if node.status == NodeStatus.WAITING_APPROVAL
        ]
        parked = [node_id for node_id, node in state.nodes.items() if node.waiting is not None]
        folds = folds_of(state.nodes)
        order = folded(dependency_order(state.nodes, levels), folds)
        return cls(state, deps, levels, order, waiting, parked, folds=folds)

    def rows(self, room: int) -> tuple[list[str], Counter[str]]:
        """The rows that fit in ``room`` (remembered per room: the terminal rarely resizes)."""
        if room not in self.fits:
            self.fits[room] = rows_that_fit(self.state, self.order, room, self.folds)
        return self.fits[room]


class RunView:
    """A run as ``dagwright watch`` shows it. ``update`` swaps in a new read of the run
    (the live display may be drawing the previous one meanwhile, from another thread);
    ``max_rows`` caps the rows of a printed (not live) view."""

    def __init__(self, state: RunState, max_rows: int | None = None) -> None:
        self.snapshot = Snapshot.of(state)
        self.max_rows = max_rows

    @property
    def state(self) -> RunState:
        return self.snapshot.state

    def update(self, state: RunState) -> None:
        self.snapshot = Snapshot.of(state, self.snapshot)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        height = self.max_rows or options.max_height or console.height
        yield self.render(height, time.time())

    def render(self, height: int, now: float) -> RenderableType:
        snapshot = self.snapshot  # one read for the whole drawing
        hints = approval_hints(snapshot) + wait_hints(snapshot, now)
        room = max(MIN_ROWS, height - HEADER_LINES - TABLE_CHROME_LINES - len(hints))
        shown, left_out = snapshot.rows(room)
        parts: list[RenderableType] = [*header(snapshot.state, now), table(snapshot, shown, now)]
        if left_out:
            parts.append(Text(more_line(left_out), style="dim"))
        parts.extend(hints)
        return Group(*parts)


def header(state: RunState, now: float) -> list[Text]:
    counts = state.counts
    elapsed = seconds_between(state.created_at, state.finished_at, now)
    title = Text.assemble(
        "run ", (state.run_id, "bold"), " ", styled_status(state.status.value),
        f" · {format_seconds(elapsed)}",
    )  # fmt: skip
    line = (
        f"{counts.done}/{counts.total} done · {counts.running} running · "
        f"{counts.failed} failed · "
        + (f"{counts.skipped} skipped · " if counts.skipped else "")
        + f"{counts.waiting_approval} waiting approval · "
        f"{state.usage.total_tokens:,} tokens · {cost(state.usage)}"
    )
    if state.reason:
        line += f" · {state.reason}"
    if state.tearing_down:
        line += f" · {state.teardown_note()}"
    return [title, Text(line)]


def table(snapshot: Snapshot, shown: list[str], now: float) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold", expand=False)
    # Node ids whole (a person copies them into `approve`, `status`): the other columns give way.
    longest = max((len(label(snapshot, node_id)) for node_id in shown), default=4)
    table.add_column("node", no_wrap=True, min_width=longest)
    for column in ("state", "type", "attempts", "took", "tokens in", "tokens out", "cost"):
        justify = "left" if column in ("state", "type") else "right"
        table.add_column(column, no_wrap=True, justify=justify)  # type: ignore[arg-type]
    table.add_column("needs", no_wrap=True, overflow="ellipsis", max_width=40)
    for node_id in shown:
        table.add_row(*row(snapshot, node_id, now))
    return table


def label(snapshot: Snapshot, node_id: str) -> str:
    """The node's id, indented by its depth in the DAG (a fold: under its mapped node)."""
    fold = snapshot.folds.get(node_id)
    level = snapshot.levels.get(fold.parent, 0) + 1 if fold else snapshot.levels.get(node_id, 0)
    return "  " * min(level, MAX_INDENT) + node_id


def fold_row(snapshot: Snapshot, fold: Fold) -> list[str | Text]:
    """``research[0..11]  9 succeeded, 3 running``: a map's children as one row."""
    nodes = snapshot.state.nodes
    failed = fold.first_failed(nodes)
    return [
        escape(label(snapshot, fold.label)),
        Text(fold.summary(nodes)),
        nodes[fold.children[0]].type,
        *[""] * 5,
        escape(f"first failed: {failed}") if failed else "",
    ]


def row(snapshot: Snapshot, node_id: str, now: float) -> list[str | Text]:
    if node_id in snapshot.folds:
        return fold_row(snapshot, snapshot.folds[node_id])
    node = snapshot.state.nodes[node_id]
    took = seconds_between(node.started_at, node.finished_at, now)
    if node.status != NodeStatus.RUNNING and node.finished_at is None:
        took = None  # queued again, or waiting: its last claim's start says nothing now
    return [
        escape(label(snapshot, node_id)),
        styled_status(node.status.value),
        node.type,
        str(node.attempts),
        format_seconds(took),
        tokens(node.usage.input_tokens, node),
        tokens(node.usage.output_tokens, node),
        cost(node.usage) if node.usage.llm_calls else "",
        escape(needs(snapshot.deps.get(node_id, []))),
    ]


def approval_hints(snapshot: Snapshot) -> list[Text]:
    run_id, waiting = snapshot.state.run_id, snapshot.waiting
    hints = [
        Text.assemble(
            ("waiting for approval: ", "bold yellow"),
            f"{node_id} · dagwright approve {run_id} {node_id}",
        )
        for node_id in waiting[:APPROVAL_HINTS]
    ]
    if len(waiting) > APPROVAL_HINTS:
        hints.append(Text(f"… and {len(waiting) - APPROVAL_HINTS} more waiting for approval"))
    return hints


def wait_hints(snapshot: Snapshot, now: float) -> list[Text]:
    """``waiting: research · waiting on breaker model:x, open 25 s more: last error ...``"""
    at = datetime.fromtimestamp(now, UTC)
    hints = []
    for node_id in snapshot.parked[:APPROVAL_HINTS]:
        wait = snapshot.state.nodes[node_id].waiting
        if wait is not None:
            hints.append(
                Text.assemble(("waiting: ", "bold magenta"), f"{node_id} · {wait.describe(at)}")
            )
    if len(snapshot.parked) > APPROVAL_HINTS:
        hints.append(Text(f"… and {len(snapshot.parked) - APPROVAL_HINTS} more waiting"))
    return hints


def more_line(left_out: Counter[str]) -> str:
    """``… 180 more: 170 succeeded, 10 pending``."""
    parts = ", ".join(f"{count} {status}" for status, count in left_out.most_common())
    return f"… {sum(left_out.values())} more: {parts}"
