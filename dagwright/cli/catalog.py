"""Commands about what exists: worker-types."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from dagwright.cli.options import ImportOption, JsonOption, settings_from
from dagwright.cli.output import print_json, stdout


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
    """List every registered worker type: kind, queue (for `function`, also the queues of
    functions declared with their own: `dw.function:<queue>`), model and tools. The MCP servers
    attached to agent types are started to list their tools (and stopped): a server that
    does not answer shows as such."""
    from dagwright.client.catalog import describe_worker_types

    rows = describe_worker_types(settings_from(imports))
    if json_output:
        print_json(rows)
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("type", "kind", "queue", "model"):
        table.add_column(column, no_wrap=True)
    longest_tool = max((len(tool) for row in rows for tool in shown_tools(row)), default=5)
    table.add_column("tools", overflow="fold", min_width=longest_tool + 1)  # never cut a name
    table.add_column("what it does", overflow="fold")
    for row in rows:
        table.add_row(
            row["name"],
            row["kind"],
            "\n".join([row["queue"], *row.get("function_queues", {})]),
            row["model"] or "",
            ",\n".join([*shown_tools(row), *unanswered(row["mcp_servers"])]),
            row["description"],
        )
    stdout.print(table)


def shown_tools(row: dict[str, Any]) -> list[str]:
    """The type's tools, those not offered here marked (and why is in the docs: settings)."""
    return [f"{tool} (off here)" if tool in row["not_offered"] else tool for tool in row["tools"]]


def unanswered(servers: list[dict[str, Any]]) -> list[str]:
    """``mcp:<server> (not answering)`` for each server that did not answer."""
    return [
        f"mcp:{server['server']} (not answering)" for server in servers if not server["answers"]
    ]
