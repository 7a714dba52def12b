"""The layout of a trace's timeline: one row per node attempt, bars on a time scale.

Computed once here and drawn three ways: as text in a terminal (``dagwright trace
--format gantt``, one column = one unit), as a PNG and as an SVG (one pixel = one unit).
Positions are floats on a linear scale with a fixed origin, the run's start:
``x = left + (t - origin) * units_per_s``. The image renderers embed that scale (and the
rows' geometry), so a reader can map a pixel back to a time.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

from dagwright.telemetry.run_trace import Trace
from dagwright.telemetry.spans import LLM_CALL

# Bar colours by attempt outcome (RGB): the same in the PNG, the SVG and the terminal.
OUTCOME_COLOURS: dict[str, tuple[int, int, int]] = {
    "succeeded": (46, 160, 67),
    "failed": (214, 39, 40),
    "retrying": (255, 127, 14),
    "breaker_open": (188, 189, 34),
    "batch_wait": (158, 218, 229),
    "celery_task_wait": (199, 199, 199),
    "lease_expired": (148, 103, 189),
    "taken_over": (140, 86, 75),
    "cancelled": (127, 127, 127),
    "waiting_approval": (23, 190, 207),
    "parked": (227, 119, 194),
    "running": (31, 119, 180),
    "unknown": (180, 180, 180),
}
UNKNOWN_COLOUR = OUTCOME_COLOURS["unknown"]
TICK_STEPS = (1, 2, 5)  # ticks fall on 1, 2 or 5 times a power of ten seconds
MIN_DURATION_S = 0.001  # a run that lasted no time still gets a scale


@dataclass(frozen=True)
class TimeScale:
    """Maps times to positions: ``x = left + (epoch_s - origin_s) * units_per_s``."""

    origin_s: float  # epoch seconds at x = left (the run's start)
    units_per_s: float
    left: float

    def x(self, when: datetime) -> float:
        return self.left + (when.timestamp() - self.origin_s) * self.units_per_s


@dataclass(frozen=True)
class Bar:
    """One node attempt's row."""

    span_id: str
    node: str
    attempt: int
    outcome: str
    start: datetime
    end: datetime
    x0: float
    x1: float

    @property
    def label(self) -> str:
        """``node #attempt``, and ``~N`` for the Nth claim of an attempt given back (parked,
        waiting): each row its own label."""
        claim = CLAIM_SUFFIX.search(self.span_id)
        return attempt_label(self.node, self.attempt) + (claim.group(0) if claim else "")

    @property
    def duration_s(self) -> float:
        return (self.end - self.start).total_seconds()


@dataclass(frozen=True)
class Call:
    """An LLM call, drawn inside the bar of the attempt that made it."""

    row: int
    x0: float
    x1: float


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class Timeline:
    scale: TimeScale
    bars: list[Bar]
    calls: list[Call]
    ticks: list[Tick]


CLAIM_SUFFIX = re.compile(r"~\d+$")  # run_trace.py: "<node>#<attempt>~2" for a second claim


def attempt_label(node: str | None, attempt: int | None) -> str:
    return f"{node or ''} #{attempt or 0}"


def layout(trace: Trace, *, left: float, width: float, min_tick_gap: float) -> Timeline:
    """Bars of every attempt by start time over ``width`` units from ``left`` (the run's
    whole duration), and ticks at least ``min_tick_gap`` units apart."""
    duration_s = max(trace.duration_s, MIN_DURATION_S)
    scale = TimeScale(trace.start.timestamp(), width / duration_s, left)
    bars = [
        Bar(
            span_id=span.span_id,
            node=span.node or "",
            attempt=span.attempt or 0,
            outcome=str(span.attributes.get("outcome", "unknown")),
            start=span.start,
            end=span.end,
            x0=scale.x(span.start),
            x1=scale.x(span.end),
        )
        for span in trace.attempts()
    ]
    rows = {bar.span_id: row for row, bar in enumerate(bars)}
    calls = [
        Call(rows[span.parent_id], scale.x(span.start), scale.x(span.end))
        for span in trace.spans
        if span.name == LLM_CALL and span.parent_id in rows
    ]
    step = tick_step(duration_s, width / min_tick_gap)
    ticks = [
        Tick(left + offset * scale.units_per_s, format_offset(offset, step, duration_s))
        for offset in (i * step for i in range(int(duration_s / step + 1e-9) + 1))
    ]
    return Timeline(scale, bars, calls, ticks)


def tick_step(duration_s: float, max_ticks: float) -> float:
    """The smallest 1/2/5 x 10^k seconds that gives at most ``max_ticks`` intervals."""
    exponent = math.floor(math.log10(duration_s / max(max_ticks, 1)))
    while True:
        for factor in TICK_STEPS:
            step = factor * 10.0**exponent
            if duration_s / step <= max(max_ticks, 1):
                return step
        exponent += 1


def format_offset(offset_s: float, step_s: float, axis_s: float | None = None) -> str:
    """``0.25s``, ``12s``, ``3m20s``, ``1h05m``: as precise as the tick step needs, in the
    unit of the axis's end (``axis_s``, default ``offset_s``), so that one axis does not
    mix ``90s`` with ``2m00s``."""
    unit_of = offset_s if axis_s is None else axis_s
    if unit_of < 120 or step_s < 1:
        decimals = max(0, -math.floor(math.log10(step_s) + 1e-9)) if step_s < 1 else 0
        return f"{offset_s:.{decimals}f}s"
    minutes, seconds = divmod(round(offset_s), 60)
    if unit_of < 120 * 60:
        return f"{minutes}m{seconds:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def format_duration(seconds: float) -> str:
    """A span's duration for people: ``12ms``, ``1.25s``, ``3m20s``."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 120:
        return f"{seconds:.2f}s"
    return format_offset(seconds, 1)


# Image charts (PNG and SVG): a header with the title, the legend and the time axis's
# labels, then one row per attempt. Pixel sizes.
CHART_WIDTH = 1200
CHART_TOP = 64  # y of the first row
CHART_BOTTOM = 16
CHART_RIGHT = 24
CHAR_WIDTH = 7  # enough for one character of the label font in both renderers
MAX_LABEL_CHARS = 40
MAX_ROW_HEIGHT = 22
MIN_ROW_HEIGHT = 2
MIN_LABELLED_ROW = 12  # rows thinner than this go unlabelled (thousands of attempts)
MAX_ROWS_HEIGHT = 8000  # rows get thinner to keep a big run's chart within this
MIN_TICK_GAP_PX = 90


@dataclass(frozen=True)
class Chart:
    """A timeline laid out as an image: pixel ``x`` from the scale, row ``i`` from
    ``top + i * row_height``, its bar ``bar_top`` below that and ``bar_height`` tall.
    A bar fills the pixel columns ``round(x0)`` to ``max(round(x1), round(x0) + 1) - 1``;
    its LLM calls darken its lowest ``call_height`` rows of pixels over their own extent."""

    timeline: Timeline
    width: int
    height: int
    top: int
    row_height: int
    bar_top: int
    bar_height: int
    call_height: int
    labels: list[str]  # one per bar, shortened; empty if the rows are too thin for them

    def row_y(self, row: int) -> int:
        return self.top + row * self.row_height


def chart(trace: Trace, *, width: int = CHART_WIDTH) -> Chart:
    attempts = trace.attempts()
    longest = max((len(shorten(attempt_label(s.node, s.attempt))) for s in attempts), default=0)
    left = 16 + CHAR_WIDTH * max(longest, 8)
    timeline = layout(
        trace, left=left, width=width - left - CHART_RIGHT, min_tick_gap=MIN_TICK_GAP_PX
    )
    rows = len(timeline.bars)
    row_height = max(MIN_ROW_HEIGHT, min(MAX_ROW_HEIGHT, MAX_ROWS_HEIGHT // max(rows, 1)))
    bar_top = row_height // 5
    labelled = row_height >= MIN_LABELLED_ROW
    return Chart(
        timeline=timeline,
        width=width,
        height=CHART_TOP + rows * row_height + CHART_BOTTOM,
        top=CHART_TOP,
        row_height=row_height,
        bar_top=bar_top,
        bar_height=max(1, row_height - 2 * bar_top),
        call_height=(row_height - 2 * bar_top) // 4,
        labels=[shorten(bar.label) for bar in timeline.bars] if labelled else [],
    )


def pixel_columns(x0: float, x1: float) -> tuple[int, int]:
    """The first and one-past-the-last pixel column of a bar (at least one)."""
    first = round(x0)
    return first, max(round(x1), first + 1)


LLM_CALL_LEGEND = "LLM call (darker, inside its bar)"


def legend(timeline: Timeline) -> list[tuple[str, tuple[int, int, int]]]:
    """What the chart's colours mean: the outcomes it shows, then LLM calls if any."""
    outcomes = dict.fromkeys(bar.outcome for bar in timeline.bars)
    entries = [(outcome, OUTCOME_COLOURS.get(outcome, UNKNOWN_COLOUR)) for outcome in outcomes]
    if timeline.calls:
        entries.append((LLM_CALL_LEGEND, darker(OUTCOME_COLOURS["succeeded"])))
    return entries


def darker(colour: tuple[int, int, int]) -> tuple[int, int, int]:
    """The colour of LLM calls inside a bar of ``colour``."""
    red, green, blue = colour
    return red * 3 // 5, green * 3 // 5, blue * 3 // 5


def chart_title(trace: Trace) -> str:
    return (
        f"run {trace.run_id} · {trace.status.value} · {len(trace.attempts())} attempts "
        f"of {trace.nodes} nodes · {format_duration(trace.duration_s)}"
    )


def scale_metadata(chart: Chart, trace: Trace) -> dict[str, str]:
    """What a reader needs to map the image's pixels back to times and rows."""
    scale = chart.timeline.scale
    return {
        "run_id": trace.run_id,
        "origin_epoch_s": repr(scale.origin_s),
        "px_per_s": repr(scale.units_per_s),
        "left_px": repr(scale.left),
        "top_px": str(chart.top),
        "row_height_px": str(chart.row_height),
        "bar_top_px": str(chart.bar_top),
        "bar_height_px": str(chart.bar_height),
    }


def shorten(label: str) -> str:
    """A row label cut to ``MAX_LABEL_CHARS`` in the middle of its node id, keeping the
    attempt (`` #2~3``) and both ends of the id: ids that share a long prefix stay apart."""
    if len(label) <= MAX_LABEL_CHARS:
        return label
    node, sep, attempt = label.rpartition(" #")
    room = MAX_LABEL_CHARS - len(sep) - len(attempt) - 1
    head = room // 2
    return f"{node[:head]}~{node[len(node) - (room - head) :]}{sep}{attempt}"
