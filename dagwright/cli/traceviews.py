"""A trace for people in a terminal: a tree of spans, and a Gantt chart of the attempts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.text import Text
from rich.tree import Tree

from dagwright.cli.output import cost, styled_status
from dagwright.models import Usage
from dagwright.telemetry.run_trace import Trace
from dagwright.telemetry.spans import LLM_CALL, NODE_ATTEMPT, RETRY, Span
from dagwright.telemetry.timeline import (
    OUTCOME_COLOURS,
    Bar,
    Timeline,
    attempt_label,
    format_duration,
    layout,
)

# A span's attributes shown bare (its subject), before the others as name=value.
SUBJECT_ATTRIBUTES = ("tool", "backend", "breaker")
GANTT_MIN_TICK_GAP = 12  # columns between two labelled ticks
GANTT_MAX_LABEL = 30
GANTT_MIN_PLOT = 20
BAR = "█"


def trace_tree(trace: Trace) -> Tree:
    """The run, its attempts by start time, and under each what happened in it."""
    children = trace.children()
    tree = Tree(run_label(trace))

    def grow(branch: Tree, parent_id: str) -> None:
        for span in children.get(parent_id, ()):
            grow(branch.add(span_label(span, trace)), span.span_id)

    grow(tree, trace.run_id)
    return tree


def run_label(trace: Trace) -> str:
    run = trace.run_span.attributes
    spent = ""
    if "llm_calls" in run:
        tokens = int(run["input_tokens"]) + int(run["output_tokens"])
        spent = f" · {run['llm_calls']} LLM calls · {tokens:,} tokens · {span_cost(run)}"
    took = format_duration(trace.duration_s) + ("" if trace.finished else " so far")
    skipped = f" ({run['skipped']} skipped)" if "skipped" in run else ""
    return (
        f"run [bold]{trace.run_id}[/] {_styled(trace.status.value)} · {trace.nodes} nodes"
        f"{skipped} · {len(trace.attempts())} attempts · {took}{spent}"
    )


def span_label(span: Span, trace: Trace) -> str:
    if span.name == NODE_ATTEMPT:
        return attempt_span_label(span, trace)
    if span.name == LLM_CALL:
        return llm_call_label(span)
    if span.name == RETRY:
        return retry_label(span)
    return other_label(span)


def attempt_span_label(span: Span, trace: Trace) -> str:
    attributes = span.attributes
    outcome = str(attributes.get("outcome", ""))
    offset = (span.start - trace.start).total_seconds()
    label = (
        f"[bold]{escape(span.node or '')}[/] #{span.attempt} "
        f"[cyan]{escape(str(attributes.get('worker_type', '')))}[/] {_styled(outcome)} "
        f"{format_duration(span.duration_s)} [dim]at +{offset:.2f}s[/]"
    )
    if "error_class" in attributes:
        error = f"{attributes['error_class']}: {attributes.get('error_message', '')}"
        label += f" [red]{escape(error)}[/]"
    return label


def span_cost(attributes: Mapping[str, Any]) -> str:
    """A span's ``cost_usd``, or unknown where part of it had no price."""
    usage = Usage(
        cost_usd=float(attributes.get("cost_usd", 0)),
        unpriced_tokens=int(attributes.get("unpriced_tokens", 0)),
    )
    return cost(usage)


def llm_call_label(span: Span) -> str:
    a = span.attributes
    label = (
        f"[magenta]llm.call[/] {escape(str(a.get('model', '')))} · "
        f"{int(a.get('input_tokens', 0)):,} in / {int(a.get('output_tokens', 0)):,} out tokens · "
        f"{span_cost(a)} · {format_duration(span.duration_s)}"
    )
    return label + (" · cached" if a.get("cached") else "")


def retry_label(span: Span) -> str:
    a = span.attributes
    why = f"breaker {a['breaker']} open" if "breaker" in a else a.get("error_class", "failed")
    delay = format_duration(int(a.get("delay_ms", 0)) / 1000)
    return f"[yellow]retry[/] {escape(str(why))} · again in {delay}"


def other_label(span: Span) -> str:
    """A recorded span (tool call, sandbox run, breaker event...): its subject first."""
    a = span.attributes
    subject = [str(a[name]) for name in SUBJECT_ATTRIBUTES if name in a]
    details = [f"{name}={value}" for name, value in a.items() if name not in SUBJECT_ATTRIBUTES]
    status = "[red]error[/]" if span.status == "error" else "[green]ok[/]"
    took = "" if span.end == span.start else f" {format_duration(span.duration_s)}"
    words = escape(" ".join([*subject, *details]))
    return f"[blue]{escape(span.name)}[/] {words} {status}{took}"


def _styled(status: str) -> str:
    return styled_status(status).markup


def trace_gantt(trace: Trace, width: int) -> Group:
    """One row per attempt: its label, a bar over the run's duration scaled to ``width``
    columns, its duration and outcome; a time axis on top. Readable without colour."""
    labels = (attempt_label(span.node, span.attempt) for span in trace.attempts())
    label_width = min(GANTT_MAX_LABEL, max((len(label) for label in labels), default=4))
    suffix_width = 2 + 8 + 1 + max((len(o) for o in OUTCOME_COLOURS), default=8)
    plot = max(GANTT_MIN_PLOT, width - label_width - 2 - suffix_width)
    timeline = layout(trace, left=0, width=plot, min_tick_gap=GANTT_MIN_TICK_GAP)
    pad = " " * (label_width + 1)
    lines = [
        Text(f"run {trace.run_id} · {trace.status.value} · {format_duration(trace.duration_s)}"),
        Text(pad + tick_labels(timeline, plot)),
        Text(pad + ruler(timeline, plot)),
    ]
    lines += [gantt_row(bar, label_width, plot) for bar in timeline.bars]
    return Group(*lines)


def tick_labels(timeline: Timeline, plot: int) -> str:
    line = [" "] * (plot + 12)
    free_from = 0
    for tick in timeline.ticks:
        column = round(tick.x)
        if column < free_from or column + len(tick.label) > len(line):
            continue
        line[column : column + len(tick.label)] = tick.label
        free_from = column + len(tick.label) + 1
    return "".join(line).rstrip()


def ruler(timeline: Timeline, plot: int) -> str:
    line = ["├", *("─" * plot), "┤"]
    for tick in timeline.ticks:
        column = round(tick.x)
        if 0 < column <= plot:
            line[column] = "┼"
    return "".join(line)


def gantt_row(bar: Bar, label_width: int, plot: int) -> Text:
    first = min(max(round(bar.x0), 0), plot - 1)
    end = min(max(round(bar.x1), first + 1), plot)
    colour = "rgb({},{},{})".format(*OUTCOME_COLOURS.get(bar.outcome, (128, 128, 128)))
    row = Text(f"{bar.label[:label_width]:<{label_width}} │")
    row.append(" " * first)
    row.append(BAR * (end - first), style=colour)
    row.append(" " * (plot - end) + "│ ")
    row.append(f"{format_duration(bar.duration_s):>8} {bar.outcome}")
    return row
