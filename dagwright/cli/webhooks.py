"""``dagwright webhooks list RUN`` and ``dagwright webhooks redeliver RUN [DELIVERY]``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from dagwright.cli.options import ImportOption, JsonOption, client_from
from dagwright.cli.output import print_json, stderr, stdout
from dagwright.cli.tables import Column, FittedTable, Kind
from dagwright.webhooks.records import Delivery

app = typer.Typer(
    help="A run's webhook deliveries: what was sent, what each attempt got, sending again.",
    no_args_is_help=True,
)


def register(parent: typer.Typer) -> None:
    parent.add_typer(app, name="webhooks")


@app.command("list")
def list_deliveries(
    run_id: str, json_output: JsonOption = False, imports: ImportOption = None
) -> None:
    """The run's deliveries, each with its attempts (answer or error, duration)."""
    deliveries = client_from(imports).webhooks.deliveries(run_id)
    if json_output:
        print_json([delivery.model_dump(mode="json") for delivery in deliveries])
        return
    if not deliveries:
        stderr.print(f"run {run_id} has no webhook delivery")
        return
    deliveries_table(deliveries).print(stdout, notes=stderr)


@app.command("redeliver")
def redeliver(
    run_id: str,
    delivery_id: Annotated[
        str | None, typer.Argument(help="Only this delivery (default: all of the run's).")
    ] = None,
    json_output: JsonOption = False,
    imports: ImportOption = None,
) -> None:
    """Send the run's deliveries (or one) again, with a fresh number of attempts."""
    queued = client_from(imports).webhooks.redeliver(run_id, delivery_id)
    if json_output:
        print_json([delivery.model_dump(mode="json") for delivery in queued])
        return
    stderr.print(f"queued {len(queued)} delivery(ies): the reconciler sends them at its next pass")


DELIVERY_COLUMNS = [
    Column("delivery", Kind.ID),
    Column("event"),
    Column("state"),
    Column("url", Kind.TEXT, min_width=20),
    Column("attempts"),  # one line each
]


def deliveries_table(deliveries: list[Delivery]) -> FittedTable:
    table = FittedTable(DELIVERY_COLUMNS)
    for delivery in deliveries:
        table.add_row(
            delivery.id, delivery.event, delivery.state, delivery.url, attempts_text(delivery)
        )
    return table


def attempts_text(delivery: Delivery) -> str:
    """One line per attempt: when, what answered and how long it took (or why nothing
    answered: no duration is kept then)."""
    lines = []
    for attempt in delivery.attempts:
        at = datetime.fromtimestamp(attempt.at_ms / 1000, UTC).strftime("%H:%M:%S")
        if attempt.status_code:
            lines.append(f"#{attempt.attempt} {at} {attempt.status_code} {attempt.duration_ms} ms")
        else:
            lines.append(f"#{attempt.attempt} {at} {attempt.error or '?'}")
    return "\n".join(lines) or "none yet"
