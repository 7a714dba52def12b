"""``dagwright watch RUN_ID``: a live view of a run's DAG until the run ends.

It sleeps on the run's event stream (XREAD BLOCK) and re-reads the run when something
happened, at most every ``min_refresh_s`` (longer for big runs), so watching a busy
10,000-node run costs Redis a few reads a second, and an idle one next to nothing. Only
the durations of running nodes move between two reads; the view computes them at each
redraw.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.live import Live

from dagwright.cli.exits import ExitCode
from dagwright.cli.options import ImportOption, client_from
from dagwright.cli.output import stderr
from dagwright.cli.runview import RunView
from dagwright.models import RunState, RunStatus

if TYPE_CHECKING:
    from dagwright.client import Client

REDRAWS_PER_S = 2  # a redraw of a full screen of rows costs rich some 40 ms
MIN_REFRESH_S = 0.25  # shortest time between two reads of the run
REFRESH_S_PER_NODE = 1 / 4000  # a 10,000-node run is read every 2.75 s at most
IDLE_REREAD_S = 2.0  # re-read this often even when no event comes (a trimmed stream)
FINAL_MAX_ROWS = 100  # rows of the table printed at the end; status --json has them all

console = Console(highlight=False)


def register(app: typer.Typer) -> None:
    app.command()(watch)


def watch(
    run_id: Annotated[str, typer.Argument(help="The run to watch.", show_default=False)],
    imports: ImportOption = None,
) -> None:
    """Show a run live until it ends: one row per node in dependency order, with its
    state, worker type, attempts, duration, tokens and cost. Exits like `dagwright result`:
    0 if the run succeeded, 1 if it failed or was cancelled. Ctrl-C stops watching only;
    the run goes on."""
    client = client_from(imports)
    state = client.status(run_id, include_outputs=False)
    view = RunView(state)
    if not state.status.is_final:
        try:
            state = follow(client, view) if console.is_terminal else client.wait(run_id)
        except KeyboardInterrupt:
            stderr.print(f"stopped watching; the run goes on (dagwright watch {run_id})")
            raise typer.Exit(ExitCode.INTERRUPTED) from None
        view.update(state)
    view.max_rows = FINAL_MAX_ROWS
    console.print(view)
    raise typer.Exit(ExitCode.OK if state.status == RunStatus.SUCCEEDED else ExitCode.RUN_FAILED)


def follow(client: Client, view: RunView) -> RunState:
    """Redraw ``view`` live until the run is final; returns its last state."""
    with Live(view, console=console, refresh_per_second=REDRAWS_PER_S, transient=True):
        return watch_until_final(client, view)


def watch_until_final(client: Client, view: RunView) -> RunState:
    run_id = view.state.run_id
    cursor = "$"
    while True:
        read_at = time.monotonic()
        events = client.next_events(run_id, after=cursor, wait_s=IDLE_REREAD_S)
        if events:
            cursor = events[-1].id
        pause = min_refresh_s(view.state) - (time.monotonic() - read_at)
        if pause > 0:  # let a burst of events settle into one read
            time.sleep(pause)
        state = client.status(run_id, include_outputs=False)
        view.update(state)
        if state.status.is_final:
            return state


def min_refresh_s(state: RunState) -> float:
    return MIN_REFRESH_S + len(state.nodes) * REFRESH_S_PER_NODE
