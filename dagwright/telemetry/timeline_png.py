"""The timeline chart as a PNG (Pillow), its time scale kept in the file's text chunks.

The chunks are named ``dagwright:<name>`` after ``timeline.scale_metadata`` (origin,
pixels per second, left edge, row geometry), plus ``dagwright:rows``: a JSON list of
``{"span_id", "node", "attempt", "outcome"}``, one per row from the top.
"""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont
from PIL.PngImagePlugin import PngInfo

from dagwright.telemetry.run_trace import Trace
from dagwright.telemetry.timeline import (
    OUTCOME_COLOURS,
    Chart,
    chart_title,
    darker,
    legend,
    pixel_columns,
    scale_metadata,
)

METADATA_PREFIX = "dagwright:"
BACKGROUND = (255, 255, 255)
STRIPE = (246, 246, 246)  # every other row, to follow a row across
GRID = (225, 225, 225)
INK = (40, 40, 40)
FONT_SIZE = 12

Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


def write_png(trace: Trace, chart: Chart, path: Path) -> None:
    image = Image.new("RGB", (chart.width, chart.height), BACKGROUND)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=FONT_SIZE)
    draw.text((8, 6), chart_title(trace), fill=INK, font=font)
    _draw_legend(draw, chart, font)
    _draw_rows(draw, chart, font)
    _draw_axis(draw, chart, font)
    _draw_bars(draw, chart)
    image.save(path, format="PNG", pnginfo=png_metadata(trace, chart))


def png_metadata(trace: Trace, chart: Chart) -> PngInfo:
    info = PngInfo()
    for name, value in scale_metadata(chart, trace).items():
        info.add_text(METADATA_PREFIX + name, value)
    info.add_text(METADATA_PREFIX + "rows", json.dumps(rows_metadata(chart)))
    return info


def rows_metadata(chart: Chart) -> list[dict[str, str | int]]:
    return [
        {"span_id": bar.span_id, "node": bar.node, "attempt": bar.attempt, "outcome": bar.outcome}
        for bar in chart.timeline.bars
    ]


def _draw_legend(draw: ImageDraw.ImageDraw, chart: Chart, font: Font) -> None:
    x = 8
    for meaning, colour in legend(chart.timeline):
        draw.rectangle((x, 26, x + 10, 36), fill=colour)
        draw.text((x + 14, 24), meaning, fill=INK, font=font)
        x += 14 + int(draw.textlength(meaning, font=font)) + 16


def _draw_rows(draw: ImageDraw.ImageDraw, chart: Chart, font: Font) -> None:
    for row in range(len(chart.timeline.bars)):
        y = chart.row_y(row)
        if row % 2:
            draw.rectangle((0, y, chart.width - 1, y + chart.row_height - 1), fill=STRIPE)
    for row, label in enumerate(chart.labels):
        y = chart.row_y(row) + (chart.row_height - FONT_SIZE) // 2 - 1
        draw.text((8, y), label, fill=INK, font=font)


def _draw_axis(draw: ImageDraw.ImageDraw, chart: Chart, font: Font) -> None:
    bottom = chart.height - 1
    for tick in chart.timeline.ticks:
        x = round(tick.x)
        draw.line((x, chart.top - 6, x, bottom), fill=GRID)
        room = chart.width - 2 - int(draw.textlength(tick.label, font=font))
        draw.text((min(x + 3, room), chart.top - 20), tick.label, fill=INK, font=font)


def _draw_bars(draw: ImageDraw.ImageDraw, chart: Chart) -> None:
    bars = chart.timeline.bars
    for row, bar in enumerate(bars):
        first, end = pixel_columns(bar.x0, bar.x1)
        y = chart.row_y(row) + chart.bar_top
        box = (first, y, end - 1, y + chart.bar_height - 1)
        draw.rectangle(box, fill=OUTCOME_COLOURS.get(bar.outcome, INK))
    if chart.call_height < 1:
        return
    for call in chart.timeline.calls:
        first, end = pixel_columns(call.x0, call.x1)
        bottom = chart.row_y(call.row) + chart.bar_top + chart.bar_height - 1
        colour = darker(OUTCOME_COLOURS.get(bars[call.row].outcome, INK))
        draw.rectangle((first, bottom - chart.call_height + 1, end - 1, bottom), fill=colour)
