"""The timeline chart as SVG text, its time scale in ``data-`` attributes.

The root ``<svg>`` carries ``data-<name>`` after ``timeline.scale_metadata`` (with ``_``
as ``-``); each bar is a ``<rect class="bar">`` with ``data-span-id``, ``data-node``,
``data-attempt``, ``data-outcome``, ``data-start`` and ``data-end`` (ISO 8601), whose
``x`` and ``width`` are the exact, unrounded positions on that scale (at least one
pixel wide). An attempt's LLM calls are ``<rect class="llm-call">`` inside its bar.
"""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from dagwright.telemetry.run_trace import Trace
from dagwright.telemetry.timeline import (
    CHAR_WIDTH,
    OUTCOME_COLOURS,
    Bar,
    Chart,
    chart_title,
    darker,
    legend,
    scale_metadata,
)

FONT = 'font-family="monospace" font-size="11"'
STRIPE = "#f6f6f6"
GRID = "#e1e1e1"
INK = "#282828"
INK_RGB = (40, 40, 40)


def write_svg(trace: Trace, chart: Chart, path: Path) -> None:
    path.write_text(svg_text(trace, chart), encoding="utf-8")


def svg_text(trace: Trace, chart: Chart) -> str:
    data = " ".join(
        f"data-{name.replace('_', '-')}={quoteattr(value)}"
        for name, value in scale_metadata(chart, trace).items()
    )
    lines = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{chart.width}" '
        f'height="{chart.height}" viewBox="0 0 {chart.width} {chart.height}" {data}>',
        '<rect width="100%" height="100%" fill="#ffffff"/>',
        f'<text x="8" y="18" {FONT} fill="{INK}">{escape(chart_title(trace))}</text>',
        *_legend(chart),
        *_rows(chart),
        *_axis(chart),
        *(_bar(chart, row, bar) for row, bar in enumerate(chart.timeline.bars)),
        *_calls(chart),
        "</svg>",
    ]
    return "\n".join(lines) + "\n"


def _legend(chart: Chart) -> list[str]:
    lines, x = [], 8
    for meaning, colour in legend(chart.timeline):
        lines.append(f'<rect x="{x}" y="26" width="10" height="10" fill="{_hex(colour)}"/>')
        lines.append(f'<text x="{x + 14}" y="35" {FONT} fill="{INK}">{escape(meaning)}</text>')
        x += 14 + 7 * len(meaning) + 16
    return lines


def _rows(chart: Chart) -> list[str]:
    lines = [
        f'<rect x="0" y="{chart.row_y(row)}" width="{chart.width}" '
        f'height="{chart.row_height}" fill="{STRIPE}"/>'
        for row in range(1, len(chart.timeline.bars), 2)
    ]
    for row, label in enumerate(chart.labels):
        y = chart.row_y(row) + chart.row_height // 2 + 4
        lines.append(f'<text x="8" y="{y}" {FONT} fill="{INK}">{escape(label)}</text>')
    return lines


def _axis(chart: Chart) -> list[str]:
    lines = []
    for tick in chart.timeline.ticks:
        lines.append(
            f'<line x1="{tick.x:.3f}" y1="{chart.top - 6}" x2="{tick.x:.3f}" '
            f'y2="{chart.height - 1}" stroke="{GRID}"/>'
        )
        x = min(tick.x + 3, chart.width - 2 - CHAR_WIDTH * len(tick.label))
        lines.append(
            f'<text x="{x:.3f}" y="{chart.top - 9}" {FONT} fill="{INK}">{escape(tick.label)}</text>'
        )
    return lines


def _bar(chart: Chart, row: int, bar: Bar) -> str:
    y = chart.row_y(row) + chart.bar_top
    attributes = {
        "data-span-id": bar.span_id,
        "data-node": bar.node,
        "data-attempt": str(bar.attempt),
        "data-outcome": bar.outcome,
        "data-start": bar.start.isoformat(),
        "data-end": bar.end.isoformat(),
    }
    data = " ".join(f"{name}={quoteattr(value)}" for name, value in attributes.items())
    return (
        f'<rect class="bar" x="{bar.x0:.3f}" y="{y}" width="{max(bar.x1 - bar.x0, 1):.3f}" '
        f'height="{chart.bar_height}" fill="{_hex(_colour(bar.outcome))}" {data}>'
        f"<title>{escape(bar.label)} {escape(bar.outcome)}</title></rect>"
    )


def _calls(chart: Chart) -> list[str]:
    lines = []
    height = chart.call_height
    for call in chart.timeline.calls if height else ():
        y = chart.row_y(call.row) + chart.bar_top + chart.bar_height - height
        colour = _hex(darker(OUTCOME_COLOURS.get(chart.timeline.bars[call.row].outcome, INK_RGB)))
        lines.append(
            f'<rect class="llm-call" x="{call.x0:.3f}" y="{y}" '
            f'width="{max(call.x1 - call.x0, 1):.3f}" height="{height}" fill="{colour}"/>'
        )
    return lines


def _colour(outcome: str) -> tuple[int, int, int]:
    return OUTCOME_COLOURS.get(outcome, INK_RGB)


def _hex(colour: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*colour)
