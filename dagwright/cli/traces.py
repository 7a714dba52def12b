"""``dagwright trace RUN``: a run's spans as a tree, JSON, a Gantt chart, or a PNG/SVG.

``--format json`` prints one object, the ``Trace`` model (``dagwright.telemetry.run_trace``)::

    {"version": 1, "run_id", "status", "start", "end", "finished", "nodes",
     "spans": [{"span_id", "parent_id", "name", "node", "attempt", "start", "end",
                "status": "ok"|"error", "attributes": {...}}, ...]}

Times are ISO 8601 in UTC. The run span comes first (its ``span_id`` is the run id, its
``parent_id`` null); every other span names its parent. ``name`` is one of ``run``,
``node.attempt`` (attributes ``worker_type``, ``outcome``, ``holder``, and
``error_class``/``error_message`` if it failed), ``llm.call`` (``model``,
``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``, ``cost_usd``, ``latency_ms``,
``cached``),
``node.retry`` (``delay_ms``, ``error_class`` or ``breaker``), ``tool.call``,
``sandbox.exec`` and ``breaker``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console, RenderableType

from dagwright.cli.options import client_from
from dagwright.cli.output import print_json, stdout
from dagwright.errors import InputError, MissingExtraError

# The views and the timeline layout load with the `trace` command, not with every command.
if TYPE_CHECKING:
    from dagwright.telemetry.run_trace import Trace
    from dagwright.telemetry.timeline import Chart


class TraceFormat(enum.StrEnum):
    TREE = "tree"
    JSON = "json"
    GANTT = "gantt"
    PNG = "png"
    SVG = "svg"


IMAGE_FORMATS = (TraceFormat.PNG, TraceFormat.SVG)


def trace(
    run_id: str,
    output_format: Annotated[
        TraceFormat | None,
        typer.Option(
            "--format",
            help="tree: spans for people; json: the Trace for scripts; gantt: a timeline "
            "of the node attempts in the terminal; png/svg: a timeline chart in a file. "
            "Default: from --output's extension (.png, .svg, .json), else tree.",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="File to write (png/svg: default <RUN_ID>.png/.svg; other formats: "
            "instead of stdout).",
            dir_okay=False,
        ),
    ] = None,
) -> None:
    """Show a run's trace: every node attempt, LLM call, tool call, sandbox run, retry
    and breaker event, with times. Works on running runs too (open spans end now)."""
    output_format = format_for(output_format, output)
    if output_format in IMAGE_FORMATS:
        path = output or Path(f"{run_id}.{output_format.value}")
        check_writable(path)
        write_image(client_from(None).trace(run_id), output_format, path)
        typer.echo(str(path))
        return
    if output is not None:
        check_writable(output)
    run_trace = client_from(None).trace(run_id)
    if output_format == TraceFormat.JSON:
        write_json(run_trace, output)
    else:
        show(trace_renderable(run_trace, output_format, width_of(output)), output)


# What a file's extension says it holds; a text view (tree, gantt) goes to any other name.
FORMAT_OF_SUFFIX = {".png": TraceFormat.PNG, ".svg": TraceFormat.SVG, ".json": TraceFormat.JSON}


def format_for(asked: TraceFormat | None, output: Path | None) -> TraceFormat:
    """The format ``--format`` asks for, else the one ``--output``'s extension names, else
    tree; a format the extension contradicts is refused (PNG bytes in ``x.svg``)."""
    implied = FORMAT_OF_SUFFIX.get(output.suffix.lower()) if output is not None else None
    if asked is None:
        return implied or TraceFormat.TREE
    if implied is not None and implied != asked:
        raise InputError(
            f"--format {asked.value} does not match --output {output}: name the file "
            f"*.{asked.value if asked in FORMAT_OF_SUFFIX.values() else 'txt'} "
            "or leave --format out"
        )
    if asked in IMAGE_FORMATS and output is not None and implied is None:
        raise InputError(
            f"--format {asked.value} writes a {asked.value.upper()} image: name the file "
            f"*.{asked.value}, not {output.name}"
        )
    return asked


def check_writable(path: Path) -> None:
    """Refuse before reading anything: a missing directory is a typo, not a run's fault."""
    if not path.parent.is_dir():
        raise InputError(f"cannot write {path}: no directory {path.parent}")
    if path.is_dir():
        raise InputError(f"cannot write {path}: it is a directory")


def write_image(run_trace: Trace, output_format: TraceFormat, path: Path) -> None:
    from dagwright.telemetry.timeline import chart

    layout = chart(run_trace)
    if output_format == TraceFormat.PNG:
        write_png = png_writer()
        with writing(path):
            write_png(run_trace, layout, path)
        return
    from dagwright.telemetry.timeline_svg import write_svg

    with writing(path):
        write_svg(run_trace, layout, path)


def png_writer() -> Callable[[Trace, Chart, Path], None]:
    """The PNG writer, imported only when a PNG is asked for: it needs Pillow (an extra),
    which an SVG does not."""
    try:
        from dagwright.telemetry.timeline_png import write_png
    except ImportError as exc:
        raise MissingExtraError.of(exc, "a PNG trace") from None
    return write_png


def write_json(run_trace: Trace, path: Path | None) -> None:
    if path is None:
        print_json(run_trace.model_dump(mode="json"))
    else:
        write_text(path, run_trace.model_dump_json() + "\n")


def trace_renderable(run_trace: Trace, output_format: TraceFormat, width: int) -> RenderableType:
    from dagwright.cli.traceviews import trace_gantt, trace_tree

    if output_format == TraceFormat.GANTT:
        return trace_gantt(run_trace, width)
    return trace_tree(run_trace)


def width_of(path: Path | None) -> int:
    return stdout.width if path is None else FILE_WIDTH


FILE_WIDTH = 160  # columns of a tree or Gantt chart written to a file


def show(renderable: RenderableType, path: Path | None) -> None:
    if path is None:
        stdout.print(renderable)
        return
    with writing(path), path.open("w", encoding="utf-8") as file:
        Console(file=file, width=FILE_WIDTH, no_color=True, highlight=False).print(renderable)


def write_text(path: Path, text: str) -> None:
    with writing(path):
        path.write_text(text, encoding="utf-8")


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """A failed write of ``path`` is an input error (a full disk, no permission)."""
    try:
        yield
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from exc


def register(app: typer.Typer) -> None:
    app.command("trace")(trace)
