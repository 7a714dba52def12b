"""``dagwright schedule``: goals and plans started on a cron expression or an interval."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from dagwright.cli.clock import TimeZoneOption, clock_time, zone_named
from dagwright.cli.options import (
    BudgetInputOption,
    BudgetOption,
    BudgetOutputOption,
    BudgetUsdOption,
    ImportOption,
    InputOption,
    InputsFileOption,
    JsonOption,
    WorkerTypeOption,
    budget_from,
    client_from,
    inputs_from,
)
from dagwright.cli.output import print_json, stderr, stdout
from dagwright.cli.tables import Column, FittedTable, Kind
from dagwright.errors import InputError

if TYPE_CHECKING:
    from datetime import tzinfo

    from dagwright.client import ScheduleInfo
    from dagwright.schedules.definition import Schedule
    from dagwright.schedules.store import Fire

app = typer.Typer(
    help="Schedules: goals or plans started on a cron expression or an interval, by beat.",
    no_args_is_help=True,
)

NameArgument = Annotated[str, typer.Argument(help="The schedule's name.", show_default=False)]


def register(parent: typer.Typer) -> None:
    parent.add_typer(app, name="schedule")


@app.command("add")
def add(
    name: NameArgument,
    goal: Annotated[
        str | None, typer.Argument(help="The goal to run (or --plan FILE).", show_default=False)
    ] = None,
    plan_file: Annotated[
        Path | None, typer.Option("--plan", help="A plan file to run instead of a goal.")
    ] = None,
    cron: Annotated[
        str | None, typer.Option("--cron", help='Five cron fields, e.g. "0 9 * * 1-5".')
    ] = None,
    every: Annotated[
        float | None, typer.Option("--every", min=1, help="Or: every this many seconds.")
    ] = None,
    timezone: Annotated[
        str, typer.Option("--tz", help="Timezone of the cron expression (IANA name).")
    ] = "UTC",
    overlap: Annotated[
        str,
        typer.Option(
            "--overlap", help="While the previous run still runs: skip, allow or cancel it."
        ),
    ] = "skip",
    catchup: Annotated[
        str,
        typer.Option("--catchup", help="A tick missed while nothing ran: skip, or run once."),
    ] = "skip",
    max_followups: Annotated[
        int,
        typer.Option("--followups", min=0, max=20, help="Follow-up runs each run may queue."),
    ] = 0,
    followup_depth: Annotated[
        int, typer.Option("--followup-depth", min=1, max=5, help="Follow-ups of follow-ups.")
    ] = 1,
    worker_types: WorkerTypeOption = None,
    budget_tokens: BudgetOption = None,
    budget_input_tokens: BudgetInputOption = None,
    budget_output_tokens: BudgetOutputOption = None,
    budget_usd: BudgetUsdOption = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Replace a schedule of that name.")
    ] = False,
    input_pairs: InputOption = None,
    inputs_file: InputsFileOption = None,
    webhook_urls: Annotated[
        list[str] | None,
        typer.Option(
            "--webhook",
            metavar="URL",
            help="POST a signed JSON to URL when each of its runs ends (repeat for more).",
        ),
    ] = None,
    llm_batch: Annotated[
        bool,
        typer.Option(
            "--batch",
            help="Its runs' LLM calls through the Message Batches API: half the price, "
            "each answered within 24 hours.",
        ),
    ] = False,
    memory: Annotated[
        str | None,
        typer.Option(
            "--memory", help="The memory namespace its runs' agents share (default: schedule:NAME)."
        ),
    ] = None,
    json_output: JsonOption = False,
    imports: ImportOption = None,
) -> None:
    """Add a schedule. It fires from its next tick on, wherever `dagwright beat` (or
    `dagwright up`) runs. Its runs get the inputs given (--input, --inputs), checked now."""
    from dagwright.plans.files import load_plan

    if (goal is None) == (plan_file is None):
        raise InputError("give either a goal or --plan FILE")
    client = client_from(imports)
    settings = client.settings
    plan = (
        load_plan(plan_file, max_bytes=settings.limits.max_plan_file_bytes)
        if plan_file is not None
        else None
    )
    inputs = inputs_from(input_pairs, inputs_file, plan.inputs if plan else None, settings)
    schedule = client.schedules.add(
        name,
        cron=cron,
        every_s=every,
        timezone=timezone,
        goal=goal,
        plan=plan,
        inputs=inputs,
        worker_types=worker_types,
        budget=budget_from(budget_tokens, budget_input_tokens, budget_output_tokens, budget_usd),
        overlap=overlap,
        catchup=catchup,
        max_followups=max_followups,
        followup_depth=followup_depth,
        replace=replace,
        webhooks=webhook_urls or [],
        llm_batch=llm_batch,
        memory=memory,
    )
    if json_output:
        print_json(schedule.model_dump(mode="json", exclude_none=True))
        return
    info = client.schedules.get(schedule.name, history=1)
    next_fire = clock_time(info.next_fire_at, zone_named(schedule.timezone))
    stderr.print(f"[green]✔[/] schedule {schedule.name} added: {escape(schedule.when)}")
    stderr.print(f"  next fire: {next_fire}")


@app.command("list")
def list_schedules(
    zone: TimeZoneOption = None, json_output: JsonOption = False, imports: ImportOption = None
) -> None:
    """Every schedule: when it fires next (in its own time zone, or --tz), its last run
    and that run's status."""
    shown_in = zone_named(zone) if zone else None
    infos = client_from(imports).schedules.list()
    if json_output:
        print_json([info.to_json() for info in infos])
        return
    if not infos:
        stderr.print("no schedules: add one with `dagwright schedule add`")
        return
    schedules_table(infos, shown_in).print(stdout, notes=stderr)


@app.command("show")
def show(
    name: NameArgument,
    history: Annotated[int, typer.Option("--history", min=1, help="Fires to show.")] = 20,
    zone: TimeZoneOption = None,
    json_output: JsonOption = False,
    imports: ImportOption = None,
) -> None:
    """One schedule, with the history of its fires (times in its own time zone, or --tz)."""
    shown_in = zone_named(zone) if zone else None
    info = client_from(imports).schedules.get(name, history=history)
    if json_output:
        print_json(info.to_json())
        return
    print_schedule(info, shown_in or zone_named(info.schedule.timezone))


@app.command("pause")
def pause(name: NameArgument, imports: ImportOption = None) -> None:
    """Stop firing until resumed."""
    client_from(imports).schedules.pause(name)
    stderr.print(f"schedule {name} paused")


@app.command("resume")
def resume(name: NameArgument, imports: ImportOption = None) -> None:
    """Fire again from the next tick."""
    client_from(imports).schedules.resume(name)
    stderr.print(f"schedule {name} resumed")


@app.command("remove")
def remove(name: NameArgument, imports: ImportOption = None) -> None:
    """Delete a schedule and its history (its runs stay)."""
    client_from(imports).schedules.remove(name)
    stderr.print(f"schedule {name} removed")


@app.command("run-now")
def run_now(
    name: NameArgument, json_output: JsonOption = False, imports: ImportOption = None
) -> None:
    """Fire the schedule once now, even if paused (its overlap policy applies)."""
    fire = client_from(imports).schedules.run_now(name)
    if json_output:
        print_json(fire.to_json())
        return
    if fire.run_id:
        stdout.print(fire.run_id)
        stderr.print(f"schedule {name} started run {fire.run_id}")
    else:
        stderr.print(f"schedule {name}: nothing started ({escape(fire.reason)})")


SCHEDULE_COLUMNS = [
    Column("name", Kind.ID),
    Column("when"),
    Column("what", Kind.TEXT, min_width=20),
    Column("next", optional=True),
    Column("last run", Kind.ID, optional=True),
    Column("status", optional=True),
]


def schedules_table(infos: list[ScheduleInfo], zone: tzinfo | None = None) -> FittedTable:
    """The schedules, their next fires in ``zone`` (None: each in its own)."""
    table = FittedTable(SCHEDULE_COLUMNS)
    for info in infos:
        schedule = info.schedule
        shown_in = zone or zone_named(schedule.timezone)
        table.add_row(
            schedule.name,
            schedule.when,
            what(schedule),
            "paused" if schedule.paused else clock_time(info.next_fire_at, shown_in),
            info.last_run_id or "-",
            info.last_run_status.value if info.last_run_status else "-",
        )
    return table


def what(schedule: Schedule) -> str:
    if schedule.goal is not None:
        return f"goal: {schedule.goal[:60]}"
    assert schedule.plan is not None
    return f"plan: {schedule.plan.goal or f'{len(schedule.plan.nodes)} nodes'}"[:70]


def print_schedule(info: ScheduleInfo, zone: tzinfo) -> None:
    schedule = info.schedule
    fields = {
        "name": schedule.name,
        "when": schedule.when,
        "what": what(schedule),
        "overlap": schedule.overlap.value,
        "catch-up": schedule.catchup.value,
        "state": "paused" if schedule.paused else "active",
        "next": clock_time(info.next_fire_at, zone),
    }
    for label, value in fields.items():
        stdout.print(f"[bold]{label:>9}[/] {escape(value)}")
    for fire in info.history:
        stdout.print(f"  {escape(describe_fire(fire, zone))}")


def describe_fire(fire: Fire, zone: tzinfo) -> str:
    at = clock_time(fire.fired_at, zone)
    if fire.run_id:
        return f"{at} started {fire.run_id}" + (f" ({fire.reason})" if fire.reason else "")
    return f"{at} skipped: {fire.reason}"
