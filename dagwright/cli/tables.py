"""Tables that fit the terminal: ids whole, text wrapped at words, columns left out last.

Rich shrinks every wrappable column alike when a table is too wide, down to one letter
(``Perma / nentE`` in an 80-column ``dlq list``). Here each column says what it holds:

- ``ID``: copied into the next command; never wrapped nor cut.
- ``SHORT``: a status, a count, a time; kept on one line at its natural width.
- ``TEXT``: free text (an error, a goal, arguments); takes the room left, wrapped at
  words, never narrower than ``min_width`` (or its natural width, if smaller).

When the minimums do not fit, the columns marked ``optional`` are left out, the last
listed first, and a note on stderr names them and ``--wide``. ``wide`` shows every
column at its natural width (the terminal then wraps the lines).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.segment import Segments
from rich.table import Table
from rich.text import Text

COLUMN_GAP = 2  # rich's padding between columns of a box-less table
TEXT_MIN_WIDTH = 16  # narrower, wrapped text reads as a column of letters
UNDER_INDENT = 2  # a TEXT cell printed under its row


class Kind(enum.Enum):
    ID = "id"
    SHORT = "short"
    TEXT = "text"


@dataclass(frozen=True)
class Column:
    header: str
    kind: Kind = Kind.SHORT
    optional: bool = False
    """Left out (the last optional one first) when the table does not fit."""
    min_width: int = TEXT_MIN_WIDTH
    justify: str = "left"


@dataclass(frozen=True)
class Layout:
    inline: list[int]
    """The columns side by side, by index."""
    widths: dict[int, int]
    under: list[int] = field(default_factory=list)
    """TEXT columns printed under each row, when the ids leave them no room beside it."""


@dataclass
class FittedTable:
    """Rows of cells under ``columns``; ``print`` lays them out. A string cell is shown as
    it is (no rich markup: ids, errors and arguments come from outside), a Text with its
    styles."""

    columns: list[Column]
    rows: list[list[Text]] = field(default_factory=list)

    def add_row(self, *cells: str | Text) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append([cell if isinstance(cell, Text) else Text(cell) for cell in cells])
        self.__dict__.pop("naturals", None)  # measured again when next laid out

    def print(self, console: Console, *, wide: bool = False, notes: Console | None = None) -> None:
        """Print to ``console``, fitted to its width unless ``wide``; what was left out is
        said on ``notes`` (default: the same console)."""
        layout = self.natural_layout() if wide else self.layout(console.width)
        if layout.under:
            self.print_stacked(console, layout)
        else:
            print_wider(console, self.rendered(layout, self.rows), total(layout.widths))
        shown = {*layout.inline, *layout.under}
        left_out = [column.header for i, column in enumerate(self.columns) if i not in shown]
        if left_out:
            (notes or console).print(
                f"[dim]left out to fit {console.width} columns: {', '.join(left_out)} "
                "(--wide shows them)[/]"
            )

    def natural_layout(self) -> Layout:
        every = list(range(len(self.columns)))
        return Layout(every, {index: self.natural_width(index) for index in every})

    def layout(self, width: int) -> Layout:
        """Side by side, less optional columns (the last first) if need be; if even that
        leaves no room, the TEXT columns go under each row."""
        every = list(range(len(self.columns)))
        inline = self.fitting(every, width, self.least_width)
        if total({i: self.least_width(i) for i in inline}) <= width:
            return Layout(inline, self.shared_widths(inline, width))
        text = [i for i in every if self.columns[i].kind == Kind.TEXT]
        beside = self.fitting([i for i in every if i not in text], width, self.natural_width)
        return Layout(beside, {i: self.natural_width(i) for i in beside}, under=text)

    def fitting(
        self, candidates: list[int], width: int, measure: Callable[[int], int]
    ) -> list[int]:
        """``candidates`` less the optional ones, last first, while they do not fit."""
        kept = list(candidates)
        optional = [index for index in kept if self.columns[index].optional]
        while optional and total({i: measure(i) for i in kept}) > width:
            kept.remove(optional.pop())
        return kept

    def natural_width(self, index: int) -> int:
        """The widest line of the column's header and cells."""
        return self.naturals[index]

    @functools.cached_property
    def naturals(self) -> list[int]:
        """Each column's widest line, measured once: the layout asks for them again and
        again while it leaves columns out."""
        return [
            max(Text(line).cell_len for line in [column.header, *self.cell_lines(index)])
            for index, column in enumerate(self.columns)
        ]

    def cell_lines(self, index: int) -> list[str]:
        return [line for row in self.rows for line in row[index].plain.splitlines() or [""]]

    def least_width(self, index: int) -> int:
        column = self.columns[index]
        natural = self.natural_width(index)
        return min(natural, column.min_width) if column.kind == Kind.TEXT else natural

    def shared_widths(self, kept: list[int], width: int) -> dict[int, int]:
        """ID and SHORT columns at their natural width; TEXT ones share what is left in
        proportion to what more they would take, each at least its least width."""
        widths = {index: self.least_width(index) for index in kept}
        room = width - total(widths)
        wanted = {
            index: self.natural_width(index) - widths[index]
            for index in kept
            if self.columns[index].kind == Kind.TEXT
        }
        all_wanted: int = sum(wanted.values())
        if room > 0 and all_wanted > 0:
            for index, more in wanted.items():
                widths[index] += min(more, room * more // all_wanted)
        return widths

    def print_stacked(self, console: Console, layout: Layout) -> None:
        """Each row beside its neighbours' columns, its TEXT cells under it, indented."""
        for number, row in enumerate(self.rows):
            rendered = self.rendered(layout, [row], header=number == 0)
            print_wider(console, rendered, total(layout.widths))
            for index in layout.under:
                under = Padding(row[index], (0, 0, 0, UNDER_INDENT), expand=False)
                console.print(under, soft_wrap=False)

    def rendered(
        self, layout: Layout, rows: list[list[Text]], *, header: bool = True
    ) -> RenderableType:
        table = Table(box=None, pad_edge=False, header_style="bold", show_header=header)
        for index in layout.inline:
            column = self.columns[index]
            table.add_column(
                column.header,
                width=layout.widths[index],
                no_wrap=column.kind != Kind.TEXT,
                overflow="fold",
                justify=column.justify,  # type: ignore[arg-type]
            )
        for row in rows:
            table.add_row(*(row[index] for index in layout.inline))
        return table


def total(widths: dict[int, int]) -> int:
    """The width of a table of columns this wide."""
    return sum(widths.values()) + COLUMN_GAP * max(len(widths) - 1, 0)


def print_wider(console: Console, renderable: RenderableType, width: int) -> None:
    """Print ``renderable`` laid out ``width`` wide, even wider than the terminal (which
    then wraps the lines): ``Console.print(width=)`` would cap it at the terminal's width,
    and cut the ids."""
    options = console.options.update_width(max(width, 1))
    for line in console.render_lines(renderable, options, pad=False, new_lines=True):
        console.print(Segments(line), crop=False, soft_wrap=True, end="")
