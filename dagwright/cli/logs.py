"""``dagwright logs RUN [NODE] [-f]``: what a run's nodes printed and logged.

One line per log line: its time, its node (``#2`` after it when the node ran more than
once), where it came from (``out``, ``err``, or a ``logging`` level) and its text,
wrapped to the terminal's width (a traceback's lines indented under it). ``-f`` reads on
every ``FOLLOW_POLL_S`` until the run ends, then says how it ended; ``--json`` prints one
JSON object per line, for scripts.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from dagwright.cli.exits import ExitCode
from dagwright.cli.options import ImportOption, JsonOption, client_from
from dagwright.cli.output import print_json, stderr, stdout
from dagwright.models import NodeLogLine, RunStatus
from dagwright.shown_ids import shown_id

if TYPE_CHECKING:
    from dagwright.client import Client

FOLLOW_POLL_S = 0.5  # -f reads the run's status and new lines this often
CONTINUATION = "    "  # before the wrapped part of a long line, and a traceback's lines
SOURCE_TAGS = {"stdout": "out", "stderr": "err"}
LEVEL_TAGS = {"WARNING": "WARN", "CRITICAL": "CRIT"}
LEVEL_STYLES = {"WARN": "yellow", "ERROR": "red", "CRIT": "bold red", "err": "magenta"}


def register(parent: typer.Typer) -> None:
    parent.command("logs")(logs)


def logs(
    run_id: Annotated[str, typer.Argument(help="The run.", show_default=False)],
    node: Annotated[
        str | None, typer.Argument(help="Only this node's lines.", show_default=False)
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep reading until the run ends.")
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", help="With -f: stop after this many seconds (exit 3)."),
    ] = None,
    json_output: JsonOption = False,
    imports: ImportOption = None,
) -> None:
    """What the run's nodes printed (stdout, stderr) and logged (logging records; an
    agent's LLM calls, tool calls and retries), oldest first, each line with its node
    and attempt. Kept per attempt, bounded (DAGWRIGHT_NODE_LOG_MAX_BYTES) and redacted;
    they expire with the run. With -f: exits 0 if the run succeeded, 1 if not."""
    client = client_from(imports)
    printer = LogPrinter(node is None, json_output)
    cursor = printer.show(client.logs(run_id, node))
    if cursor is None and not json_output:
        whose = f"node {node} of run {run_id}" if node else f"run {run_id}"
        stderr.print(Text(f"{whose} has no log lines{' yet' if follow else ''}"))
    if not follow:
        return
    status = follow_logs(client, printer, run_id, node, cursor, timeout)
    stderr.print(Text(f"run {run_id} ended: {status.value}"))
    if status != RunStatus.SUCCEEDED:
        raise typer.Exit(ExitCode.RUN_FAILED)


def follow_logs(
    client: Client,
    printer: LogPrinter,
    run_id: str,
    node: str | None,
    cursor: str | None,
    timeout: float | None,
) -> RunStatus:
    """Print new lines until the run ends (the status is read before the lines, so the
    last read has every line written before the end); the run's final status."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        status, _ = client.counts(run_id)
        cursor = printer.show(client.logs(run_id, node, cursor)) or cursor
        if status.is_final:  # once more: a worker's line about the end comes just after it
            time.sleep(FOLLOW_POLL_S)
            printer.show(client.logs(run_id, node, cursor))
            return status
        if deadline is not None and time.monotonic() >= deadline:
            stderr.print(Text(f"run {run_id} is still {status.value} after {timeout:g}s"))
            raise typer.Exit(ExitCode.NOT_FINISHED)
        time.sleep(FOLLOW_POLL_S)


class LogPrinter:
    """Prints log lines as they are read; remembers which nodes ran more than once."""

    def __init__(self, with_node: bool, json_output: bool) -> None:
        self.with_node = with_node
        self.json_output = json_output
        self.retried: set[str] = set()

    def show(self, lines: list[NodeLogLine]) -> str | None:
        """Print ``lines``; the id of the last (the cursor to read on from), if any."""
        self.retried.update(line.node for line in lines if line.attempt > 1)
        for line in lines:
            if self.json_output:
                print_json(line.model_dump(mode="json"))
            else:
                stdout.print(self.styled(line))
        sys.stdout.flush()  # -f into a pipe: each line as it comes, not at the exit
        return lines[-1].id if lines else None

    def styled(self, line: NodeLogLine) -> Text:
        tag = line_tag(line)
        prefix = line.at.astimezone().strftime("%H:%M:%S ")
        if self.with_node:
            prefix += shown_id(line.node)
        if line.node in self.retried:
            prefix += f"#{line.attempt}"
        text = Text(prefix + " " if self.with_node or line.node in self.retried else prefix)
        text.append(tag.ljust(5), style=LEVEL_STYLES.get(tag, "dim"))
        text.append(" ")
        text.append(wrapped(line.text, len(text.plain), terminal_width()))
        return text


def line_tag(line: NodeLogLine) -> str:
    """``out``, ``err``, or the record's level (``INFO``, ``WARN``...)."""
    if line.source != "log":
        return SOURCE_TAGS[line.source]
    level = line.level or "INFO"
    return LEVEL_TAGS.get(level, level)


def wrapped(text: str, indent: int, width: int) -> str:
    """``text`` after a prefix ``indent`` wide, folded to ``width`` columns: its first
    line beside the prefix, what does not fit and its later lines (a traceback's)
    indented under it."""
    width = max(width, indent + 20)
    first, *rest = text.split("\n")
    pad = " " * indent
    pieces = textwrap.wrap(first, width, initial_indent=pad, subsequent_indent=CONTINUATION)
    lines = [pieces[0][indent:] if pieces else "", *pieces[1:]]
    for more in rest:
        folded = textwrap.wrap(
            more, width, initial_indent=CONTINUATION, subsequent_indent=CONTINUATION
        )
        lines.extend(folded or [""])
    return "\n".join(lines)


def terminal_width() -> int:
    return shutil.get_terminal_size().columns
