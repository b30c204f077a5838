"""Tables that fit the terminal: at 80 columns as on a wide screen, no cell is wrapped
letter by letter and no header is cut.

Each column says how it may give way. Short columns (ids, counts, times) always show
whole. When the row is still too wide, columns that are empty in every row are left
out (``optional``), then headers take their short form, then the least important
columns are left out (``drop``: the highest rank first) while the names that must be
read whole (``whole``) would not fit, and what room is left is shared by the free-text
columns (``free``): the others give way first, down to their ``least``; each is cut
with an ellipsis, or folds onto more lines (``wrap``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.table import Table
from rich.text import Text

Cell = str | Text
# Cells that say "nothing here": a column holding only these may be left out.
EMPTY = frozenset({"", "-", "·"})
GAP = 2  # between columns
LEAST = 6  # the narrowest a free column becomes


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    short: str | None = None
    right: bool = False
    free: bool = False
    wrap: bool = False
    cap: int = 40
    optional: bool = False
    drop: int = 0  # left out when room is short: the highest rank first; 0 never
    whole: bool = False  # a free column that should show its values whole
    least: int = LEAST  # how narrow a free column that is not ``whole`` becomes first


def fitted(columns: Sequence[Column], rows: Sequence[Mapping[str, Cell]], width: int) -> Table:
    """``rows`` (cells by column name) as a table at most ``width`` cells wide."""
    shown = list(columns)
    if _needed(shown, rows, short=False) > width:
        shown = [c for c in shown if not (c.optional and _empty(c, rows))]
    short = _needed(shown, rows, short=False) > width
    while _needed_whole(shown, rows, short=short) > width and any(c.drop for c in shown):
        shown.remove(max((c for c in shown if c.drop), key=lambda c: c.drop))
    headers = {c.name: (c.short or c.name) if short else c.name for c in shown}
    widths = {c.name: _widest(c, rows, headers[c.name]) for c in shown}
    free = [c for c in shown if c.free]
    room = width - GAP * (len(shown) - 1) - sum(widths[c.name] for c in shown if not c.free)
    wanted = {c.name: min(widths[c.name], c.cap) for c in free}
    yielding = {c.name: min(wanted[c.name], c.least) for c in free if not c.whole}
    shares = _share(wanted, room, floors=yielding)
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in shown:
        table.add_column(
            headers[column.name],
            justify="right" if column.right else "left",
            no_wrap=not column.wrap,
            overflow="fold" if column.wrap else "ellipsis",
            width=shares.get(column.name, widths[column.name]),
        )
    for row in rows:
        table.add_row(*(row.get(column.name, "") for column in shown))
    return table


def _length(cell: Cell) -> int:
    return cell.cell_len if isinstance(cell, Text) else Text(cell).cell_len


def _widest(column: Column, rows: Sequence[Mapping[str, Cell]], header: str) -> int:
    return max([len(header), *(_length(row.get(column.name, "")) for row in rows)])


def _empty(column: Column, rows: Sequence[Mapping[str, Cell]]) -> bool:
    return all(str(row.get(column.name, "")).strip() in EMPTY for row in rows)


def _needed(columns: Sequence[Column], rows: Sequence[Mapping[str, Cell]], *, short: bool) -> int:
    total = GAP * (len(columns) - 1)
    for column in columns:
        header = (column.short or column.name) if short else column.name
        widest = _widest(column, rows, header)
        total += min(widest, max(LEAST, column.cap)) if column.free else widest
    return total


def _needed_whole(
    columns: Sequence[Column], rows: Sequence[Mapping[str, Cell]], *, short: bool
) -> int:
    """The width with every ``whole`` column whole and the other free ones at their least."""
    total = GAP * (len(columns) - 1)
    for column in columns:
        header = (column.short or column.name) if short else column.name
        widest = _widest(column, rows, header)
        if column.free:
            total += min(widest, column.cap) if column.whole else min(widest, column.least)
        else:
            total += widest
    return total


def _share(wanted: dict[str, int], room: int, *, floors: dict[str, int]) -> dict[str, int]:
    """Shrink the widest of ``wanted`` until they fit in ``room``: first those in
    ``floors``, down to their floor; then any, down to ``LEAST``."""
    widths = dict(wanted)
    while sum(widths.values()) > room:
        above = [n for n in floors if widths[n] > floors[n]]
        if not above:
            break
        widths[max(above, key=lambda n: widths[n])] -= 1
    while widths and sum(widths.values()) > room:
        name = max(widths, key=lambda n: widths[n])
        if widths[name] <= LEAST:
            break
        widths[name] -= 1
    return widths
