"""``dagwright approvals list``, ``dagwright approve`` and ``dagwright reject``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer
from rich.markup import escape

from dagwright.cli.options import ImportOption, JsonOption, WideOption, client_from
from dagwright.cli.output import print_json, stderr, stdout
from dagwright.cli.tables import Column, FittedTable, Kind
from dagwright.json_views import approval_json
from dagwright.models import Approval, ApprovalStatus

app = typer.Typer(
    help="Requests for a person's approval: nodes and tool calls waiting for a decision.",
    no_args_is_help=True,
)

CommentOption = Annotated[
    str, typer.Option("--comment", "-m", help="Why: kept in the audit, shown to the agent.")
]
ByOption = Annotated[
    str | None, typer.Option("--by", help="Who decides (default: your user name).")
]
ARGS_SHOWN_CHARS = 60


def register(parent: typer.Typer) -> None:
    parent.add_typer(app, name="approvals")
    parent.command("approve")(approve)
    parent.command("reject")(reject)


@app.command("list")
def list_approvals(
    run_id: Annotated[str | None, typer.Option("--run", help="Only this run's requests.")] = None,
    json_output: JsonOption = False,
    wide: WideOption = False,
    imports: ImportOption = None,
) -> None:
    """Requests waiting for a decision, oldest first."""
    approvals = client_from(imports).approvals.list(run_id)
    if json_output:
        print_json([approval_json(approval) for approval in approvals])
        return
    if not approvals:
        stderr.print("no approvals waiting")
        return
    approvals_table(approvals).print(stdout, wide=wide, notes=stderr)
    stderr.print("decide with: dagwright approve RUN NODE  |  dagwright reject RUN NODE -m WHY")


def approve(
    run_id: str,
    node_id: str,
    comment: CommentOption = "",
    args: Annotated[
        str | None,
        typer.Option(
            "--args",
            help="JSON object replacing the proposed arguments (a tool's input, or a "
            "node's params/instruction/code).",
        ),
    ] = None,
    by: ByOption = None,
    json_output: JsonOption = False,
    imports: ImportOption = None,
) -> None:
    """Approve a waiting node or tool call: it goes on (with --args if given)."""
    from dagwright.orchestrator.control.approvals import parse_edited_args

    edited = parse_edited_args(args)
    approval = client_from(imports).approvals.approve(
        run_id, node_id, comment=comment, args=edited, by=by
    )
    report_decision(approval, json_output)


def reject(
    run_id: str,
    node_id: str,
    comment: CommentOption = "",
    by: ByOption = None,
    json_output: JsonOption = False,
    imports: ImportOption = None,
) -> None:
    """Reject a waiting node (it fails) or tool call (the agent is told, and goes on)."""
    approval = client_from(imports).approvals.reject(run_id, node_id, comment=comment, by=by)
    report_decision(approval, json_output)


def report_decision(approval: Approval, json_output: bool) -> None:
    if json_output:
        print_json(approval_json(approval))
        return
    decision = approval.decision
    assert decision is not None
    stdout.print(
        f"{decision.status.value} {escape(approval.subject)} of run {approval.run_id}: "
        f"{what_happens_next(approval)}"
    )


def what_happens_next(approval: Approval) -> str:
    """What the decision does to the node, in words: a rejected node fails."""
    approved = approval.status == ApprovalStatus.APPROVED
    if approval.kind == "node":
        return (
            "the node is queued again, to run"
            if approved
            else "the node fails, and the nodes that depend on it are blocked"
        )
    if approved:
        return "the node is queued again; the tool call runs"
    return "the node is queued again; the agent is told the call was refused"


APPROVAL_COLUMNS = [
    Column("run", Kind.ID),
    Column("node", Kind.ID),
    Column("waits to"),
    Column("waiting", justify="right"),
    Column("args", Kind.TEXT, min_width=24),
    Column("expires in", justify="right", optional=True),
    Column("kind", optional=True),
]


def approvals_table(approvals: list[Approval]) -> FittedTable:
    table = FittedTable(APPROVAL_COLUMNS)
    now = datetime.now(UTC)
    for approval in approvals:
        args = json.dumps(approval.args, sort_keys=True, default=str)
        table.add_row(
            approval.run_id,
            approval.node,
            approval.asks,
            span(now - approval.requested_at),
            args if len(args) <= ARGS_SHOWN_CHARS else args[: ARGS_SHOWN_CHARS - 1] + "…",
            span(approval.deadline - now),
            approval.kind,
        )
    return table


def span(delta: timedelta) -> str:
    """A coarse duration for a table: 42s, 17m, 5h."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 2 * 3600:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"
