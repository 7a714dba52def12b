"""Commands about what exists: worker-types."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from dagwright.cli.options import ImportOption, JsonOption, settings_from
from dagwright.cli.output import print_json, stdout
from dagwright.settings import Settings

if TYPE_CHECKING:
    from dagwright.workers import WorkerType


def register(app: typer.Typer) -> None:
    app.command("worker-types")(worker_types)
    app.command("fake-llm")(fake_llm)


def fake_llm(
    script: Annotated[Path, typer.Option("--script", "-s", help="YAML/JSON script of answers.")],
    port: Annotated[int, typer.Option("--port", "-p", help="0 picks a free port.")] = 0,
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    models: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            "-m",
            help="A model id to accept besides the SDK's (repeatable; also "
            "DAGWRIGHT_FAKE_LLM_MODELS, comma-separated).",
        ),
    ] = None,
) -> None:
    """Serve a fake Anthropic Messages API from a script, to run LLM plans offline:
    point ANTHROPIC_BASE_URL at the address it prints. It refuses what the real API
    refuses (unknown models, broken tool turns, ...) with the real API's errors."""
    from dagwright.testing.fake_anthropic import main as serve_fake_llm

    argv = ["--script", str(script), "--port", str(port), "--host", host]
    for model in models or []:
        argv += ["--model", model]
    raise typer.Exit(serve_fake_llm(argv))


def worker_types(json_output: JsonOption = False, imports: ImportOption = None) -> None:
    """List every registered worker type: kind, queue, model and tools."""
    from dagwright.registry import build_registry

    settings = settings_from(imports)
    rows = [describe(worker_type, settings) for worker_type in build_registry(settings).types()]
    if json_output:
        print_json(rows)
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("type", "kind", "queue", "model"):
        table.add_column(column, no_wrap=True)
    table.add_column("tools")
    table.add_column("what it does")
    for row in rows:
        table.add_row(
            row["name"],
            row["kind"],
            row["queue"],
            row["model"] or "",
            ", ".join(row["tools"]),
            row["description"],
        )
    stdout.print(table)


def describe(worker_type: WorkerType, settings: Settings) -> dict[str, Any]:
    model = worker_type.model or (settings.default_model if worker_type.kind == "agent" else None)
    return {
        "name": worker_type.name,
        "kind": worker_type.kind,
        "queue": worker_type.queue,
        "model": model,
        "tools": list(worker_type.tools),
        "description": worker_type.description,
    }
