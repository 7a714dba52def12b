"""``dagwright token create|list|revoke``: the API tokens of ``dagwright server``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from dagwright.cli.options import JsonOption, client_from
from dagwright.cli.output import print_json, stderr, stdout
from dagwright.cli.tables import Column, FittedTable, Kind

if TYPE_CHECKING:
    from dagwright.client.tokens import TokenInfo


def register(parent: typer.Typer) -> None:
    app = typer.Typer(
        name="token",
        help="API tokens for `dagwright server`: create, list, revoke.",
        no_args_is_help=True,
    )
    app.command("create")(create)
    app.command("list")(list_tokens)
    app.command("revoke")(revoke)
    parent.add_typer(app)


def create(
    name: Annotated[str, typer.Argument(help="Who or what uses the token (for people).")],
    scope: Annotated[
        str,
        typer.Option(
            "--scope",
            "-s",
            help="read (GETs), operate (+ submit, cancel, approve, "
            "replay), or admin (+ purge, create/delete schedules).",
        ),
    ] = "read",
    json_output: JsonOption = False,
) -> None:
    """Create a token and print it, this once: only its sha256 is kept."""
    new = client_from(None).tokens.create(name, scope=scope)
    if json_output:
        print_json({**new.info.to_json(), "token": new.token})
        return
    stderr.print(
        f"token {new.info.id} ({new.info.name}, {new.info.scope.value}) created; "
        "it is shown this once:",
        soft_wrap=True,
    )
    stdout.print(new.token)


def list_tokens(json_output: JsonOption = False) -> None:
    """Every token: id, name, scope, when created and last used (never the token)."""
    infos = client_from(None).tokens.list()
    if json_output:
        print_json([info.to_json() for info in infos])
        return
    if not infos:
        stderr.print("no tokens: `dagwright token create NAME --scope read|operate|admin`")
        return
    tokens_table(infos).print(stdout, notes=stderr)


def revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id (`dagwright token list`).")],
    json_output: JsonOption = False,
) -> None:
    """Revoke a token: requests with it are refused, its dashboard sessions end."""
    info = client_from(None).tokens.revoke(token_id)
    if json_output:
        print_json(info.to_json())
        return
    stderr.print(f"token {info.id} ({info.name}) revoked")


TOKEN_COLUMNS = [
    Column("id", Kind.ID),
    Column("name", Kind.TEXT),
    Column("scope"),
    Column("created", optional=True),
    Column("last used"),
]


def tokens_table(infos: list[TokenInfo]) -> FittedTable:
    table = FittedTable(TOKEN_COLUMNS)
    for info in infos:
        used = info.last_used_at.strftime("%Y-%m-%d %H:%M:%S") if info.last_used_at else "never"
        table.add_row(
            info.id,
            info.name,
            info.scope.value,
            info.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            used,
        )
    return table
