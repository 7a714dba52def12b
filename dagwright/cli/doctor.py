"""``dagwright doctor``: check the deployment, one line per check (exit 1 if one fails)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from dagwright.cli.exits import ExitCode
from dagwright.cli.options import ImportOption, JsonOption, settings_from
from dagwright.cli.output import print_json, stderr, stdout

if TYPE_CHECKING:
    from dagwright.doctor import Check

MARKS = {  # by Status (a StrEnum of dagwright.doctor, imported when the checks run)
    "ok": "[green]✔[/]",
    "warn": "[yellow]![/]",
    "fail": "[red]✘[/]",
    "skip": "[dim]-[/]",
}


def register(app: typer.Typer) -> None:
    app.command()(doctor)


def doctor(json_output: JsonOption = False, imports: ImportOption = None) -> None:
    """Check that runs can work here: Redis, the broker, workers and their queues, the
    reconciler, circuit breakers, dead letters, the sandbox and the LLM.

    Exit 0 when nothing fails (warnings allowed), 1 when a check fails.
    """
    from dagwright.doctor import diagnose, healthy

    settings = settings_from(imports)
    checks = diagnose(settings)
    ok = healthy(checks)
    if json_output:
        print_json({"ok": ok, "checks": [check.to_json() for check in checks]})
    else:
        print_checks(checks)
    raise typer.Exit(ExitCode.OK if ok else ExitCode.RUN_FAILED)


def print_checks(checks: list[Check]) -> None:
    """A line per check on stdout, its hint below it, and a one-line verdict on stderr."""
    from dagwright.doctor import Status

    width = max(len(check.name) for check in checks)
    for check in checks:
        stdout.print(
            f"{MARKS[check.status]} {escape(check.name.ljust(width))}  {escape(check.detail)}"
        )
        if check.hint and check.status != Status.OK:
            stdout.print(f"  {' ' * width}  [dim]→ {escape(check.hint)}[/]")
    stderr.print(verdict(checks))


def verdict(checks: list[Check]) -> str:
    from dagwright.doctor import Status, plural

    failed = sum(check.status == Status.FAIL for check in checks)
    warned = sum(check.status == Status.WARN for check in checks)
    if not failed and not warned:
        return "[green]all checks passed[/]"
    counts = [plural(failed, "failure")] if failed else []
    counts += [plural(warned, "warning")] if warned else []
    return f"[{'red' if failed else 'yellow'}]{', '.join(counts)}[/]"
