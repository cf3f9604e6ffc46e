"""How the matrix pane (grid.py) uses its room: the rows first, then the cursor's line, the
window's line, the legend (whole, with the heads' blocks in short, on one line, or not at all);
and which columns a window shows, keeping the cursor's and, on a matrix of queries × keys, that
row's own key.

At 80 × 24 the legend of a model's Q (twelve heads' blocks, five lines) left two rows of seven,
and sliding_window's A showed columns 1–7 of 8, cutting off 步, the band's last cell.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from attnwalk.render import style

if TYPE_CHECKING:
    from attnwalk.app.grid import MatrixView

GAP = 2  # cells between columns
TIGHT_COLS = 16  # up to this many columns are drawn one cell apart when that fits them all
TOP_LINES = 2  # the column labels and the rule under them
STATUS_LINES = 2  # the cursor's cell and value; where the window is, what changed (or a hint)
NOTES_MIN = 3  # lines the notes keep under the matrix: the worked cell's title and first line, and
# after m or h the old → new line above them (walk.py's CSS)
WINDOW_MIN_ROWS = 4  # rows a window keeps before a line of legend is drawn under it


def legend_lines(items: tuple[str, ...], width: int, view: MatrixView, console: Console) -> list[Text]:
    """The legend's items joined by " · ", a line broken only between items ("× masked: weight
    0" stays together); an item wider than the line wraps on its own."""
    width, sep = max(width, 1), f" {style.markers(view.opts).dot} "
    lines: list[str] = []
    for item in items:
        if lines and cell_len(lines[-1] + sep + item) <= width:
            lines[-1] += sep + item
        else:
            lines += [line.plain for line in Text(item).wrap(console, width)]
    return [Text(line, style=style.NOTE) for line in lines]


def legends(view: MatrixView | None, width: int, console: Console) -> list[list[Text]]:
    """The legend as it may be drawn, from the most to the least: whole; with its head blocks in
    brief; that cut to one line; none."""
    if view is None or not view.legend:
        return [[], [], [], []]
    whole = legend_lines(view.legend, width, view, console)
    brief = legend_lines(view.brief or view.legend, width, view, console)
    one = brief[:1]
    if len(brief) > 1:
        one = [Text(one[0].plain, style=style.NOTE)]
        one[0].append(" …" if not view.opts.ascii else " ...")
        one[0].truncate(width, overflow="ellipsis")
    return [whole, brief, one, []]


def fit(view: MatrixView, width: int, height: int, console: Console) -> tuple[list[Text], bool]:
    """What goes under the rows in `height` lines: the legend (as much of it as leaves every row
    in view) and whether the status's second line shows. A window (rows that scroll in any case)
    keeps a line of legend if WINDOW_MIN_ROWS rows remain."""
    n = view.M.shape[0]
    drawn = legends(view, width, console)
    for legend in drawn:
        if TOP_LINES + n + STATUS_LINES + len(legend) <= height:
            return legend, True
    if TOP_LINES + n + 1 <= height:  # every row and the cursor's line: the second line gives way
        return [], False
    one = drawn[-2]
    if height - TOP_LINES - STATUS_LINES - len(one) >= min(n, WINDOW_MIN_ROWS):
        return one, True
    return [], True


def columns(view: MatrixView, cursor: tuple[int, int], left: int, room: int,
            width_of: Callable[[int], int]) -> tuple[int, int, int]:
    """The window's columns in `room` cells: (its first column, how many, the gap between them),
    moved from `left` as little as keeps the cursor's column in view, and on a matrix of queries
    × keys the cursor row's own column (its diagonal cell) too where both fit. A few columns that
    fit only one cell apart are drawn one cell apart. `width_of(j)`: column j's widest cell."""
    n_cols = view.M.shape[1]
    r, c = cursor
    gap = GAP
    if n_cols <= TIGHT_COLS:
        needs = sum(width_of(j) for j in range(n_cols))
        if needs + GAP * n_cols > room >= needs + n_cols:
            gap = 1

    def span(first: int) -> int:  # how many columns from `first` fit
        used = count = 0
        for j in range(first, n_cols):
            w = width_of(j) + gap
            if count and used + w > room:
                break
            used, count = used + w, count + 1
        return max(count, 1)

    def reaching(last: int) -> int:  # the first column of a window that still holds `last`
        used, j = 0, last
        while j >= 0 and (j == last or used + width_of(j) + gap <= room):
            used += width_of(j) + gap
            j -= 1
        return j + 1

    if c < left:
        left = c
    elif c >= left + span(left):  # moved right, as little as the cursor needs
        left = reaching(c)
    d = r  # the diagonal's column
    if view.diagonal and d < n_cols and not left <= d < left + span(left):
        if d < left and c < d + span(d):
            left = d
        elif d > left and reaching(d) <= c:
            left = reaching(d)
    return left, span(left), gap
