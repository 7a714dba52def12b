"""Commands about what exists: worker-types."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from dagwright.cli.options import ImportOption, JsonOption, WideOption, settings_from
from dagwright.cli.output import print_json, stderr, stdout
from dagwright.cli.tables import Column, FittedTable, Kind


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


def worker_types(
    json_output: JsonOption = False, wide: WideOption = False, imports: ImportOption = None
) -> None:
    """List every registered worker type: kind, queue (for `function`, also the queues of
    functions declared with their own: `dw.function:<queue>`), model and tools. The MCP servers
    attached to agent types are started to list their tools (and stopped): a server that
    does not answer shows as such."""
    from dagwright.client.catalog import describe_worker_types

    rows = describe_worker_types(settings_from(imports))
    if json_output:
        print_json(rows)
        return
    table = FittedTable(WORKER_TYPE_COLUMNS)
    for row in rows:
        table.add_row(
            row["name"],
            "\n".join([row["queue"], *row.get("function_queues", {})]),
            "\n".join(
                [
                    *shown_tools(row),
                    *unanswered(row["mcp_servers"]),
                    *(f"skill:{name}" for name in row.get("skills", [])),
                ]
            ),
            row["description"],
            row["model"] or "",
            row["kind"],
        )
    table.print(stdout, wide=wide, notes=stderr)


WORKER_TYPE_COLUMNS = [
    Column("type", Kind.ID),
    Column("queue"),
    Column("tools"),  # one per line: a name is never cut
    Column("what it does", Kind.TEXT, min_width=24),
    Column("model", optional=True),
    Column("kind", optional=True),
]


def shown_tools(row: dict[str, Any]) -> list[str]:
    """The type's tools, those not offered here marked (and why is in the docs: settings)."""
    return [f"{tool} (off here)" if tool in row["not_offered"] else tool for tool in row["tools"]]


def unanswered(servers: list[dict[str, Any]]) -> list[str]:
    """``mcp:<server> (not answering)`` for each server that did not answer."""
    return [
        f"mcp:{server['server']} (not answering)" for server in servers if not server["answers"]
    ]
