"""``dagwright score RUN NAME VALUE`` and ``dagwright scores RUN``: feedback on a run's
work, given from a terminal (by the OS user) and read back."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from dagwright.cli.options import ImportOption, JsonOption, client_from
from dagwright.cli.output import print_json, stderr, stdout
from dagwright.cli.tables import Column, FittedTable, Kind
from dagwright.errors import ScoreError
from dagwright.models import RunScore
from dagwright.shown_ids import shown_id

CLI_SOURCE = "cli"
TRUE_WORDS = frozenset({"true", "yes", "pass"})
FALSE_WORDS = frozenset({"false", "no", "fail"})
SHOWN_COMMENT_CHARS = 200  # of each comment in the table (--json gives them whole)


def register(parent: typer.Typer) -> None:
    parent.command("score")(score)
    parent.command("scores")(scores)


def score(
    run_id: Annotated[str, typer.Argument(help="The run to score.", show_default=False)],
    name: Annotated[
        str,
        typer.Argument(help="What is scored (correctness, user.thumbs).", show_default=False),
    ],
    value: Annotated[
        str,
        typer.Argument(help="A number, or true/false (1/0).", show_default=False),
    ],
    comment: Annotated[
        str | None, typer.Option("--comment", "-m", help="Why (at most 2000 characters).")
    ] = None,
    json_output: JsonOption = False,
    imports: ImportOption = None,
) -> None:
    """Score a run, now or long after it ended: kept with the run (several of one name
    too), shown by `dagwright scores`, the API and the run's page."""
    given = client_from(imports).score(run_id, name, score_value(value), comment, source=CLI_SOURCE)
    if json_output:
        print_json(given.model_dump(mode="json"))
        return
    stdout.print(Text(f"scored run {run_id}: {given.name} = {number(given.value)}"))


def scores(run_id: str, json_output: JsonOption = False, imports: ImportOption = None) -> None:
    """Every score of the run, oldest first: name, value, who, when, and why."""
    found = client_from(imports).scores(run_id)
    if json_output:
        print_json([given.model_dump(mode="json") for given in found])
        return
    if not found:
        stderr.print(Text(f"run {run_id} has no score: `dagwright score {run_id} NAME VALUE`"))
        return
    scores_table(found).print(stdout, notes=stderr)


def print_scores_summary(found: list[RunScore]) -> None:
    """``scores: correctness 0.9 (mean of 2) · user.thumbs 1``: each name's mean, in the
    order first given (nothing for a run with none)."""
    if found:
        stdout.print(Text(f"scores: {scores_summary(found)}"))


def scores_summary(found: list[RunScore]) -> str:
    values: dict[str, list[float]] = {}
    for given in found:
        values.setdefault(given.name, []).append(given.value)
    parts = []
    for name, seen in values.items():
        mean = number(sum(seen) / len(seen))
        parts.append(f"{name} {mean} (mean of {len(seen)})" if len(seen) > 1 else f"{name} {mean}")
    return " · ".join(parts)


def score_value(text: str) -> float | bool:
    """A score from the command line: a number, or a word for true or false."""
    word = text.strip().lower()
    if word in TRUE_WORDS or word in FALSE_WORDS:
        return word in TRUE_WORDS
    try:
        return float(word)
    except ValueError:
        raise ScoreError(
            f"score value {shown_id(repr(text))}: a score is a number or true/false"
        ) from None


SCORE_COLUMNS = [
    Column("name", Kind.TEXT, min_width=12),
    Column("value", justify="right"),
    Column("by", Kind.TEXT, min_width=12),
    Column("at"),
    Column("comment", Kind.TEXT, min_width=20),
]


def scores_table(found: list[RunScore]) -> FittedTable:
    table = FittedTable(SCORE_COLUMNS)
    for given in found:
        table.add_row(
            given.name,
            number(given.value),
            shown_id(given.by),
            given.at.strftime("%Y-%m-%d %H:%M:%S"),
            comment_line(given.comment),
        )
    return table


def number(value: float) -> str:
    return f"{value:g}"


def comment_line(comment: str | None) -> str:
    """A comment on one table cell: its first ``SHOWN_COMMENT_CHARS`` characters, lines
    joined, control characters escaped (a comment is anyone's text: no escape sequence of
    it reaches the terminal)."""
    if not comment:
        return ""
    flat = " ".join(comment.split("\n"))
    cut = flat[:SHOWN_COMMENT_CHARS]
    shown = "".join(char if char.isprintable() else repr(char)[1:-1] for char in cut)
    return shown + ("…" if len(flat) > SHOWN_COMMENT_CHARS else "")
