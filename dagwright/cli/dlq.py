"""``dagwright dlq``: list, show, replay, purge and count dead letters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.text import Text

from dagwright.cli.clock import clock_time
from dagwright.cli.exits import ExitCode
from dagwright.cli.options import ImportOption, JsonOption, WideOption, client_from
from dagwright.cli.output import print_json, stderr, stdout
from dagwright.cli.tables import Column, FittedTable, Kind
from dagwright.dlq import Classification, DeadLetter, DeadLetterStats, RawMessage
from dagwright.errors import InputError
from dagwright.json_views import letter_json
from dagwright.shown_ids import shown_id

if TYPE_CHECKING:
    from dagwright.orchestrator.control.dead_letter_replay import ReplayResult

app = typer.Typer(
    help="The dead-letter queue: nodes that failed for good, kept to be replayed.",
    no_args_is_help=True,
)

RunOption = Annotated[str | None, typer.Option("--run", help="Only this run's dead letters.")]
TypeOption = Annotated[
    str | None, typer.Option("--worker-type", "-w", help="Only nodes of this worker type.")
]
ClassOption = Annotated[
    str | None,
    typer.Option("--class", help=f"Only this classification: {', '.join(Classification)}."),
]
FilterOption = Annotated[
    list[str] | None,
    typer.Option(
        "--filter",
        help="KEY=VALUE with KEY run, worker-type or class (repeatable; like the flags).",
    ),
]
CLASS_STYLE = {
    "transient": "yellow",
    "permanent": "red",
    "budget": "magenta",
    "policy": "magenta",
    "poison": "bold red",
    "timeout": "yellow",
    "malformed": "bold red",
}
STATUS_STYLE = {"pending": "", "replayed": "green", "purged": "dim"}


def register(parent: typer.Typer) -> None:
    parent.add_typer(app, name="dlq")


@app.command("list")
def list_letters(
    run_id: RunOption = None,
    worker_type: TypeOption = None,
    classification: ClassOption = None,
    status: Annotated[
        str | None, typer.Option("--status", help="pending, replayed or purged.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=0, help="At most this many (0: all).")] = 50,
    json_output: JsonOption = False,
    wide: WideOption = False,
    imports: ImportOption = None,
) -> None:
    """List dead letters, newest first."""
    letters = client_from(imports).dlq.list(
        run_id=run_id,
        worker_type=worker_type,
        classification=classification,
        status=status,
        limit=limit,
    )
    if json_output:
        print_json([letter_json(letter, full=False) for letter in letters])
        return
    if not letters:
        stderr.print("no dead letters")
        return
    letters_table(letters).print(stdout, wide=wide, notes=stderr)


@app.command("show")
def show(entry_id: str, json_output: JsonOption = False, imports: ImportOption = None) -> None:
    """Everything a dead letter holds: the node's spec, the error and its traceback."""
    letter = client_from(imports).dlq.get(entry_id)
    if json_output:
        print_json(letter_json(letter, full=True))
        return
    print_letter(letter)


@app.command("replay")
def replay(
    entry_id: Annotated[str | None, typer.Argument(show_default=False)] = None,
    all_letters: Annotated[
        bool, typer.Option("--all", help="Replay every pending dead letter (or every match).")
    ] = False,
    run_id: RunOption = None,
    worker_type: TypeOption = None,
    classification: ClassOption = None,
    filters: FilterOption = None,
    fresh: Annotated[
        bool,
        typer.Option("--fresh", help="Drop the node's checkpoint: an agent starts over."),
    ] = False,
    json_output: JsonOption = False,
    imports: ImportOption = None,
) -> None:
    """Run dead-lettered nodes again: each run re-opens and goes on from where it
    stopped (completed nodes and completed LLM calls are kept)."""
    where = filter_args(run_id, worker_type, classification, filters)
    check_selection(
        entry_id, all_letters, where, "a dead letter id, --all, or filters such as --run RUN"
    )
    client = client_from(imports)
    if entry_id is not None:
        results = [client.dlq.replay(entry_id, fresh=fresh)]
    else:
        results = client.dlq.replay_all(**where, fresh=fresh)
    report_replays(results, json_output)
    if any(not result.replayed for result in results):
        raise typer.Exit(ExitCode.RUN_FAILED)


@app.command("purge")
def purge(
    entry_id: Annotated[str | None, typer.Argument(show_default=False)] = None,
    all_letters: Annotated[
        bool, typer.Option("--all", help="Purge every dead letter (or every match).")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm purging several.")] = False,
    run_id: RunOption = None,
    worker_type: TypeOption = None,
    classification: ClassOption = None,
    filters: FilterOption = None,
    json_output: JsonOption = False,
    imports: ImportOption = None,
) -> None:
    """Delete dead letters for good (a pending one can then no longer be replayed)."""
    where = filter_args(run_id, worker_type, classification, filters)
    check_selection(
        entry_id, all_letters, where, "a dead letter id, or --all --yes (filters narrow it)"
    )
    if entry_id is None and not yes:
        raise InputError("purging several dead letters cannot be undone: add --yes")
    client = client_from(imports)
    if entry_id is not None:
        client.dlq.purge(entry_id)
        purged = 1
    else:
        purged = client.dlq.purge_all(**where)
    if json_output:
        print_json({"purged": purged})
    else:
        stderr.print(f"purged {purged} dead letter{'s' if purged != 1 else ''}")


@app.command("stats")
def stats(json_output: JsonOption = False, imports: ImportOption = None) -> None:
    """How many dead letters there are, by status, classification and worker type."""
    found = client_from(imports).dlq.stats()
    if json_output:
        print_json(found.model_dump(mode="json"))
        return
    print_stats(found)


# -- arguments ------------------------------------------------------------------------

FILTER_KEYS = {"run": "run_id", "worker-type": "worker_type", "class": "classification"}


def filter_args(
    run_id: str | None,
    worker_type: str | None,
    classification: str | None,
    filters: list[str] | None,
) -> dict[str, str | None]:
    """The client's filter keywords from the flags and ``--filter KEY=VALUE`` items."""
    where: dict[str, str | None] = {
        "run_id": run_id,
        "worker_type": worker_type,
        "classification": classification,
    }
    for item in filters or []:
        key, _, value = item.partition("=")
        name = FILTER_KEYS.get(key.strip().replace("_", "-"))
        if name is None or not value.strip():
            raise InputError(
                f"--filter {shown_id(item)!r}: expected KEY=VALUE with KEY one of "
                f"{', '.join(FILTER_KEYS)}"
            )
        where[name] = value.strip()
    return where


def check_selection(
    entry_id: str | None, all_letters: bool, where: dict[str, str | None], which: str
) -> None:
    """InputError unless the arguments name one dead letter (``entry_id``) or several
    (--all or a filter), not both; ``which`` says how to name them."""
    several = all_letters or any(where.values())
    if entry_id is not None and several:
        raise InputError("give either a dead letter id, or --all / filters, not both")
    if entry_id is None and not several:
        raise InputError(f"say which: {which}")


# -- output ---------------------------------------------------------------------------


LETTER_COLUMNS = [
    Column("id", Kind.ID),
    Column("run", Kind.ID),
    Column("node", Kind.ID),
    Column("class"),
    Column("error", Kind.TEXT, min_width=20),
    Column("status", optional=True),
    Column("tries", optional=True, justify="right"),
    Column("type", optional=True),
    Column("failed", optional=True),
]


def letters_table(letters: list[DeadLetter]) -> FittedTable:
    table = FittedTable(LETTER_COLUMNS)
    for letter in letters:
        table.add_row(
            letter.id,
            letter.run_id or "-",  # a malformed message has no run, no node
            letter.node_id or "-",
            Text(letter.classification, style=CLASS_STYLE.get(letter.classification, "")),
            f"{letter.error_class}: {letter.message}"[:120],
            Text(letter.status, style=STATUS_STYLE.get(letter.status, "")),
            str(letter.attempts),
            letter.worker_type,
            f"{letter.last_failure_at:%Y-%m-%d %H:%M:%S}",
        )
    return table


def print_letter(letter: DeadLetter) -> None:
    if letter.raw_message is not None:
        print_malformed(letter, letter.raw_message)
        return
    fields = {
        "id": letter.id,
        "status": letter.status,
        "run": letter.run_id,
        "node": f"{letter.node_id} ({letter.worker_type}), fence {letter.fence}",
        "class": letter.classification,
        "attempts": str(letter.attempts),
        "first failure": clock_time(letter.first_failure_at),
        "last failure": clock_time(letter.last_failure_at),
        "error": f"{letter.error_class}: {letter.message}",
    }
    for name, value in fields.items():
        stdout.print(f"[bold]{name:>13}[/] {escape(value)}")
    stdout.print("[bold]         spec[/]", escape(str(letter.spec)))
    if letter.traceback:
        stdout.print("[bold]    traceback[/]")
        stdout.print(escape(letter.traceback.rstrip()), highlight=False)
    if letter.status == "pending":
        stderr.print(f"replay it with: dagwright dlq replay {letter.id}")


def print_malformed(letter: DeadLetter, raw: RawMessage) -> None:
    """A message a worker dropped unread: where it came from and what it claimed to be
    (its body was never kept), and that there is nothing to replay."""
    size = f"{raw.body_bytes} bytes" if raw.body_bytes >= 0 else "unknown (unreadable message)"
    fields = {
        "id": letter.id,
        "status": letter.status,
        "class": letter.classification,
        "queue": raw.queue or "unknown",
        "content type": raw.content_type or "-",
        "encoding": raw.content_encoding or "-",
        "body size": size,
        "dropped at": clock_time(letter.last_failure_at),
        "why": letter.message,
    }
    for name, value in fields.items():
        stdout.print(f"[bold]{name:>13}[/] {escape(value)}")
    if letter.status == "pending":
        stderr.print(f"not a node, nothing to replay: drop it with dagwright dlq purge {letter.id}")


def report_replays(results: list[ReplayResult], json_output: bool) -> None:
    if json_output:
        print_json([result.to_json() for result in results])
        return
    if not results:
        stderr.print("no pending dead letters match")
    for result in results:
        where = f"{result.run_id}/{result.node_id}" if result.run_id else "(malformed message)"
        if result.replayed:
            reopened = " (run re-opened)" if result.reopened else ""
            stderr.print(f"[green]↻[/] {result.entry_id} {where} queued again{reopened}")
            if result.warning:
                stderr.print(f"  [yellow]warning:[/] {escape(result.warning)}")
        else:
            stderr.print(f"[yellow]-[/] {result.entry_id} {where}: {escape(result.reason)}")


def print_stats(found: DeadLetterStats) -> None:
    def counts(by: dict[str, int]) -> str:
        return ", ".join(f"{name} {count}" for name, count in sorted(by.items())) or "-"

    stdout.print(f"[bold]dead letters[/] {found.total}")
    stdout.print(f"[bold]   by status[/] {counts(found.by_status)}")
    stdout.print(f"[bold]    by class[/] {counts(found.by_classification)}")
    stdout.print(f"[bold]     by type[/] {counts(found.by_worker_type)}")
    if found.newest_at is not None:
        stdout.print(f"[bold]      oldest[/] {clock_time(found.oldest_at)}")
        stdout.print(f"[bold]      newest[/] {clock_time(found.newest_at)}")
