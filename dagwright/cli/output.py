"""What the CLI shows: JSON for scripts, tables and live progress for people.

Results and JSON go to stdout; progress, summaries and errors go to stderr, so
``dagwright run plan.yaml > result.json`` keeps only the result.
"""

from __future__ import annotations

import json
import sys
import time
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.text import Text
from rich.tree import Tree

from dagwright.cli.map_folds import Fold, folded, folds_of
from dagwright.cli.tables import Column, FittedTable, Kind
from dagwright.json_views import event_json
from dagwright.models import (
    DEFAULT_RUN_IF,
    AuditEntry,
    Budget,
    Event,
    Node,
    NodeState,
    NodeStatus,
    NodeWait,
    Plan,
    RunCounts,
    RunState,
    RunStatus,
    Usage,
)

stderr = Console(stderr=True, highlight=False)
stdout = Console(highlight=False, soft_wrap=True)

STATUS_STYLE = {
    "succeeded": "green",
    "failed": "red",
    "blocked": "yellow",
    "cancelled": "yellow",
    "skipped": "dim",
    "running": "cyan",
    "queued": "blue",
    "retry_wait": "magenta",
    "waiting_approval": "bold yellow",
    # outcomes of an attempt, as traces show them
    "retrying": "red",
    "lease_expired": "red",
}
MAX_TABLE_ROWS = 50
PLAIN_PROGRESS_EVERY_S = 5.0


def print_error(message: str) -> None:
    stderr.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)


def print_warning(message: str) -> None:
    stderr.print(f"[bold yellow]warning:[/] {escape(message)}", soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, default=str) + "\n")
    sys.stdout.flush()


def print_result(result: Any) -> None:
    """A text result as itself, anything else as indented JSON."""
    if isinstance(result, str):
        sys.stdout.write(result + ("" if result.endswith("\n") else "\n"))
    else:
        sys.stdout.write(json.dumps(result, indent=2, default=str) + "\n")
    sys.stdout.flush()


def styled_status(status: str) -> Text:
    return Text(status, style=STATUS_STYLE.get(status, ""))


def spend(usage: Usage) -> str:
    """`` · 1,234 tokens · $0.0123`` for runs that called an LLM, else nothing."""
    if not usage.llm_calls and not usage.total_tokens:
        return ""
    return f" · {usage.total_tokens:,} tokens{web_requests(usage)} · {cost(usage)}"


def web_requests(usage: Usage) -> str:
    """`` · 3 web searches · 1 web fetch`` where the API's server tools ran, else nothing
    (searches are billed apart from tokens: the cost shown includes them)."""
    parts = [
        f" · {count} web {noun}{'' if count == 1 else plural}"
        for count, noun, plural in (
            (usage.web_search_requests, "search", "es"),
            (usage.web_fetch_requests, "fetch", "es"),
        )
        if count
    ]
    return "".join(parts)


def cost(usage: Usage) -> str:
    """``$0.0123``; ``unknown`` or ``≥ $0.0123 + unpriced`` where a model had no price."""
    return usage.cost_words(f"${usage.cost_usd:.4f}")


def budget_spent(budget: Budget, usage: Usage) -> str:
    """``12,340 / 50,000 tokens, $0.04 / $0.50``: what the run spent of each limit."""
    from dagwright.workers.budgets import limits_of  # the workers package: only when shown

    parts = []
    for dimension, limit in limits_of(budget):
        spent, of = dimension.format(dimension.used(usage)), dimension.format(limit)
        spent = usage.cost_words(spent) if dimension.is_usd else spent.split(" ")[0]
        parts.append(f"{spent} / {of}")
    return ", ".join(parts)


def duration(state: RunState) -> str:
    if state.finished_at is None:
        return ""
    return f" in {(state.finished_at - state.created_at).total_seconds():.2f}s"


def print_summary(state: RunState) -> None:
    """One line on stderr saying how the run ended (and a table of what went wrong)."""
    counts = state.counts
    mark = {"succeeded": "[green]✔[/]", "failed": "[red]✘[/]"}.get(
        state.status.value, "[yellow]■[/]"
    )
    stderr.print(
        f"{mark} run {state.run_id} {state.status.value}{duration(state)} · "
        f"{counts.succeeded}/{counts.total} nodes succeeded"
        + (f", {counts.failed} failed, {counts.blocked} blocked" if counts.failed else "")
        + (f", {counts.skipped} skipped" if counts.skipped else "")
        + spend(state.usage)
        + (f" · {escape(state.reason)}" if state.reason else "")
    )
    if state.status != RunStatus.SUCCEEDED:
        problems = {nid: n for nid, n in state.nodes.items() if n.status != NodeStatus.SUCCEEDED}
        print_nodes(stderr, problems)


def print_nodes(console: Console, nodes: dict[str, NodeState], limit: int = MAX_TABLE_ROWS) -> None:
    """The nodes' table (the first ``limit`` rows, a map's children folded in one), and
    how many more rows there are."""
    folds = folds_of(nodes)
    rows = folded(nodes, folds)
    node_table(nodes, folds, rows[:limit]).print(console, notes=stderr)
    if len(rows) > limit:
        console.print(f"… and {len(rows) - limit} more rows (--json shows all)")


def node_columns(with_usage: bool) -> list[Column]:
    usage = [Column("tokens", justify="right"), Column("cost", justify="right")]
    return [
        Column("node", Kind.ID),
        Column("status"),
        Column("error", Kind.TEXT, min_width=20),
        Column("type", optional=True),
        Column("attempts", justify="right", optional=True),
        Column("took", justify="right", optional=True),
        *(usage if with_usage else []),
    ]


def node_table(nodes: dict[str, NodeState], folds: dict[str, Fold], rows: list[str]) -> FittedTable:
    """The table of ``rows``: node ids, or a map's folded children (``folds``)."""
    with_usage = any(node.usage.llm_calls for node in nodes.values())
    table = FittedTable(node_columns(with_usage))
    for node_id in rows:
        if node_id in folds:
            table.add_row(*fold_row(folds[node_id], nodes, with_usage))
            continue
        node = nodes[node_id]
        took = ""
        if node.started_at and node.finished_at:
            took = f"{(node.finished_at - node.started_at).total_seconds():.2f}s"
        spent = [f"{node.usage.total_tokens:,}", cost(node.usage)] if with_usage else []
        table.add_row(
            node_id,
            styled_status(node.status.value),
            why_not_done(node),
            node.type,
            str(node.attempts),
            took,
            *spent,
        )
    return table


def fold_row(fold: Fold, nodes: dict[str, NodeState], with_usage: bool) -> list[str]:
    """A map's children in one row (the columns of ``node_columns``): their states
    counted, the first failure named."""
    failed = fold.first_failed(nodes)
    why = f"{failed}: {why_not_done(nodes[failed])}" if failed else ""
    blanks = ["", "", *(["", ""] if with_usage else [])]  # attempts, took[, tokens, cost]
    return [fold.label, fold.summary(nodes), why, nodes[fold.children[0]].type, *blanks]


APPROVAL_WAIT = "waits for a person's approval (dagwright approvals list)"


def why_not_done(node: NodeState) -> str:
    """A failed node's error, or what a parked node waits on (else nothing)."""
    if node.waiting is not None:
        return node.waiting.describe()
    if node.status == NodeStatus.WAITING_APPROVAL:
        return APPROVAL_WAIT
    error = node.error if node.status == NodeStatus.FAILED else None
    return f"{error.error_class}: {error.message}" if error else ""


def plan_tree(plan: Plan) -> Tree:
    """A plan as a tree from its roots down its dependencies; a node with several
    dependencies is drawn under the first, and referred to under the others."""
    from dagwright.plans.validation import dependents_of

    tree = Tree(f"[bold]{escape(plan.goal or 'plan')}[/]")
    by_id = {node.id: node for node in plan.nodes}
    children = dependents_of(plan.nodes)
    outputs = set(plan.output_nodes())
    drawn: set[str] = set()

    def draw(branch: Tree, node_id: str) -> None:
        if node_id in drawn:
            branch.add(f"[dim]↳ {node_id} (above)[/]")
            return
        drawn.add(node_id)
        child = branch.add(node_label(by_id[node_id], node_id in outputs))
        for dependent in children[node_id]:
            draw(child, dependent)

    for node in plan.nodes:
        if not node.depends_on:
            draw(tree, node.id)
    return tree


def node_label(node: Node, is_output: bool) -> str:
    what = node.instruction or (
        f"{node.function}({json.dumps(node.params)})" if node.function else ""
    )
    if len(what) > 90:
        what = what[:87] + "..."
    mark = " [green]← output[/]" if is_output else ""
    rule = f" [magenta]run_if: {node.run_if}[/]" if node.run_if != DEFAULT_RUN_IF else ""
    return f"[bold]{node.id}[/] [cyan]{node.type}[/] {escape(what)}{rule}{mark}"


def print_status(state: RunState) -> None:
    counts = state.counts
    stdout.print(
        f"run [bold]{state.run_id}[/] ",
        styled_status(state.status.value),
        f" · {counts.done}/{counts.total} nodes done · {counts.running} running · "
        f"{counts.failed} failed · {counts.blocked} blocked"
        + (f" · {counts.skipped} skipped" if counts.skipped else "")
        + (f" · {counts.replaced} replaced" if counts.replaced else "")
        + (f" · {counts.waiting_approval} waiting for approval" if counts.waiting_approval else "")
        + f"{duration(state)}{spend(state.usage)}",
    )
    if state.goal:
        stdout.print(f"goal: {escape(state.goal)}")
    if state.budget is not None:
        stdout.print(f"budget: {budget_spent(state.budget, state.usage)}")
    if state.inputs:
        stdout.print(f"inputs: {escape(inputs_line(state.inputs))}", soft_wrap=True)
    if state.response_cache:
        stdout.print("response cache: on (repeated agent calls are answered at 0 tokens)")
    if state.reason:
        stdout.print(f"stopped: {escape(state.reason)}")
    if state.tearing_down:
        stdout.print(state.teardown_note())
    print_nodes(stdout, state.nodes)


INPUT_VALUE_CHARS = 40  # of each input shown by `status` (--json gives them whole)


def inputs_line(inputs: dict[str, Any]) -> str:
    """``n=3, topic="cats"``: each input as JSON, long values cut."""
    shown = []
    for name, value in inputs.items():
        text = json.dumps(value, ensure_ascii=False)
        if len(text) > INPUT_VALUE_CHARS:
            text = text[: INPUT_VALUE_CHARS - 1] + "…"
        shown.append(f"{name}={text}")
    return ", ".join(shown)


RUN_COLUMNS = [
    Column("run", Kind.ID),
    Column("status"),
    Column("nodes", justify="right"),
    Column("created"),
    Column("goal", Kind.TEXT, min_width=20),
]


def print_runs(states: list[RunState], *, wide: bool = False) -> None:
    table = FittedTable(RUN_COLUMNS)
    for state in states:
        table.add_row(
            state.run_id,
            styled_status(state.status.value),
            f"{state.counts.done}/{state.counts.total}",
            # runs are kept days, not years (retention_s): the year is noise
            state.created_at.strftime("%Y-%m-%d %H:%M:%S" if wide else "%m-%d %H:%M:%S"),
            state.goal if wide else state.goal[:60],
        )
    table.print(stdout, wide=wide, notes=stderr)


DECISION_STYLE = {
    "allow": "green",
    "deny": "red",
    "refused": "red",  # by the tool: a path out of the workspace, a domain not allowed
    "require_approval": "yellow",
    "approval_requested": "yellow",
    "approved": "green",
    "rejected": "red",
}


AUDIT_COLUMNS = [
    Column("time"),
    Column("node", Kind.ID),
    Column("tool", Kind.ID),
    Column("decision"),
    Column("why", Kind.TEXT, min_width=20),
    Column("rule", optional=True),
    Column("by", optional=True),
    Column("arguments", Kind.TEXT, min_width=20, optional=True),
]


def print_audit(entries: list[AuditEntry], *, wide: bool = False) -> None:
    table = FittedTable(AUDIT_COLUMNS)
    for entry in entries:
        decision = Text(entry.action, style=DECISION_STYLE.get(entry.action, ""))
        table.add_row(
            f"{entry.at:%H:%M:%S}",
            entry.node,
            entry.tool,
            decision,
            entry.reason,
            entry.rule,
            entry.by,
            entry.args,
        )
    table.print(stdout, wide=wide, notes=stderr)


def print_event(event: Event, *, as_json: bool) -> None:
    if as_json:
        print_json(event_json(event))
        return
    details = " ".join(f"{key}={value}" for key, value in event.data.items())
    stdout.print(f"{event.at:%H:%M:%S.%f}"[:-3], event.kind, event.node or "", details)


def progress_line(
    run_id: str,
    status: RunStatus,
    counts: RunCounts,
    elapsed_s: float,
    waits: dict[str, NodeWait] | None = None,
    note: str = "",
) -> str:
    """The progress line; ``note``: why queued nodes wait, when no node's wait says it."""
    return (
        f"run {run_id} {status.value} · {counts.done}/{counts.total} nodes done · "
        f"{counts.running} running · {counts.failed} failed · "
        + (f"{counts.waiting_approval} waiting for approval · " if counts.waiting_approval else "")
        + f"{elapsed_s:.1f}s"
        + (waits_part(waits) if waits else f" · {note}" if note else "")
    )


def waits_part(waits: dict[str, NodeWait]) -> str:
    """`` · research waiting on breaker model:x, open 25 s more: ...`` (the first wait)."""
    if not waits:
        return ""
    node_id, wait = next(iter(waits.items()))
    more = f" (+{len(waits) - 1} more waiting)" if len(waits) > 1 else ""
    return f" · {node_id} {wait.describe()}{more}"


class ProgressDisplay:
    """Live progress on stderr: a redrawn line on a terminal, a line every few seconds
    otherwise (CI logs), nothing when disabled (``--json``)."""

    def __init__(self, run_id: str, *, enabled: bool) -> None:
        self.run_id = run_id
        self.enabled = enabled
        self.started = time.monotonic()
        self._live: Live | None = None
        self._last_plain = 0.0

    def __enter__(self) -> ProgressDisplay:
        if self.enabled and stderr.is_terminal:
            self._live = Live(console=stderr, transient=True, refresh_per_second=8)
            self._live.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)

    def update(
        self,
        status: RunStatus,
        counts: RunCounts,
        waits: dict[str, NodeWait] | None = None,
        note: str = "",
    ) -> None:
        if not self.enabled:
            return
        elapsed_s = time.monotonic() - self.started
        line = progress_line(self.run_id, status, counts, elapsed_s, waits, note)
        if self._live is not None:
            self._live.update(Text(line))
        elif time.monotonic() - self._last_plain >= PLAIN_PROGRESS_EVERY_S:
            self._last_plain = time.monotonic()
            stderr.print(line)
