"""``dagwright memory``: list, show, remove, export and import memory namespaces."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from dagwright.cli.options import ImportOption, JsonOption, WideOption, client_from
from dagwright.cli.output import print_json, stderr, stdout
from dagwright.cli.tables import Column, FittedTable, Kind
from dagwright.errors import InputError
from dagwright.memory.commands import human_size

MAX_IMPORT_BYTES = 16 * 1024 * 1024  # read at most this much of an import file

app = typer.Typer(
    help="Memory namespaces: what agents offered the memory tool keep across runs.",
    no_args_is_help=True,
)
NamespaceArg = Annotated[
    str, typer.Argument(help="A namespace: a name, schedule:<name> or run:<id>.")
]
COLUMNS = [
    Column("NAMESPACE", Kind.ID),
    Column("FILES", justify="right"),
    Column("SIZE", justify="right"),
    Column("LAST WRITE", optional=True),
]


def register(parent: typer.Typer) -> None:
    parent.add_typer(app, name="memory")


@app.command("ls")
def list_namespaces(
    json_output: JsonOption = False, wide: WideOption = False, imports: ImportOption = None
) -> None:
    """List the memory namespaces, the last written first."""
    found = client_from(imports).memory.list()
    if json_output:
        print_json([info.__dict__ for info in found])
        return
    if not found:
        stderr.print("no memory namespaces")
        return
    table = FittedTable(COLUMNS)
    for info in found:
        when = _iso(info.updated_ms)
        table.add_row(info.name, str(info.files), human_size(info.bytes), when)
    table.print(stdout, wide=wide, notes=stderr)


@app.command("show")
def show(
    namespace: NamespaceArg, json_output: JsonOption = False, imports: ImportOption = None
) -> None:
    """Print a namespace's files (as data: what agents wrote, never markup)."""
    files = client_from(imports).memory.show(namespace)
    if json_output:
        print_json(files)
        return
    for path, text in files.items():
        stdout.rule(path, style="dim")
        stdout.out(text, highlight=False)


@app.command("rm")
def remove(
    namespace: NamespaceArg, json_output: JsonOption = False, imports: ImportOption = None
) -> None:
    """Forget a namespace whole."""
    client_from(imports).memory.remove(namespace)
    if json_output:
        print_json({"namespace": namespace, "removed": True})
        return
    stdout.out(f"removed {namespace}", highlight=False)


@app.command("export")
def export(namespace: NamespaceArg, imports: ImportOption = None) -> None:
    """Print a namespace as JSON, for ``dagwright memory import``."""
    print_json(client_from(imports).memory.export(namespace).model_dump())


@app.command("import")
def import_namespace(
    namespace: NamespaceArg,
    file: Annotated[Path, typer.Argument(help="An export (JSON); - reads standard input.")],
    json_output: JsonOption = False,
    imports: ImportOption = None,
) -> None:
    """Make a namespace hold exactly the files of an export (its own or another's)."""
    document = _read_export(file)
    count = client_from(imports).memory.import_(namespace, document)
    if json_output:
        print_json({"namespace": namespace, "files": count})
        return
    stdout.out(f"imported {count} file(s) into {namespace}", highlight=False)


def _read_export(file: Path) -> dict[str, object]:
    """The JSON object of ``file`` (bounded before parsing); InputError if it is none."""
    try:
        if str(file) == "-":
            raw = typer.get_binary_stream("stdin").read(MAX_IMPORT_BYTES + 1)
        else:
            with file.open("rb") as fh:
                raw = fh.read(MAX_IMPORT_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read {file}: {exc.strerror}") from None
    if len(raw) > MAX_IMPORT_BYTES:
        raise InputError(f"{file} is larger than {MAX_IMPORT_BYTES} bytes")
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{file} is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise InputError(f"{file} is not a memory export (a JSON object)")
    return document


def _iso(epoch_ms: int) -> str:
    return f"{datetime.fromtimestamp(epoch_ms / 1000, UTC):%Y-%m-%d %H:%M:%S}"
