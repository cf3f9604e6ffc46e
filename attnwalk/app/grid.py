"""The matrix pane: a window onto one stage's matrix with a cell cursor.

Only the rows and columns in view are formatted and coloured, so a 512 × 768 matrix costs what a
4 × 4 one does; the window follows the cursor. Each line is built as one Rich Text, so a mouse
click maps to a cell by the column offsets of the last render, not by asking a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding
from textual.events import Click
from textual.geometry import Size
from textual.message import Message
from textual.widget import Widget

from attnwalk.app.gridfit import GAP, NOTES_MIN, STATUS_LINES, TOP_LINES, columns, fit, legends
from attnwalk.layer.ops import row_maxima
from attnwalk.layer.stages import MASKED, WEIGHTS
from attnwalk.numbering import span
from attnwalk.render import style
from attnwalk.render.options import ViewOptions

CURSOR = "reverse bold"
CHANGED = "underline"  # a cell m or h changed: underlined, which survives NO_COLOR
WIDE_CELLS = 4096  # beside the notes, a matrix up to this many cells is measured for its own width
LEGEND_WIDTH = 60  # beside the notes, a legend's item wider than this wraps


@dataclass(eq=False)
class MatrixView:
    """What the pane shows: a matrix, its labels, how to colour it, what changed, where the cursor is."""

    M: np.ndarray
    rows: tuple[str, ...]
    cols: tuple[str, ...]
    kind: str
    opts: ViewOptions
    allowed: np.ndarray | None = None  # the mask, on S + M and A
    changed: np.ndarray | None = None  # bool, M's shape: cells that m or h changed
    legend: tuple[str, ...] = ()
    brief: tuple[str, ...] = ()  # the legend in short, where the whole one would take the rows' room
    symbol: str = ""
    diagonal: bool = False  # rows and columns are the same tokens: keep the cursor row's own column in view


class Window(NamedTuple):
    top: int
    left: int
    rows: int  # rows in view
    cols: int  # columns in view


class MatrixGrid(Widget):
    """A stage's matrix with a cursor; posts CellPicked when a click moves it."""

    DEFAULT_CSS = """
    MatrixGrid { height: auto; width: 1fr; }
    """

    BINDINGS = [
        Binding("left", "move(0, -1)", "app.key.move", key_display="←↑↓→"),
        Binding("right", "move(0, 1)", show=False),
        Binding("up", "move(-1, 0)", show=False),
        Binding("down", "move(1, 0)", show=False),
        Binding("home", "move(0, -100000)", show=False),
        Binding("end", "move(0, 100000)", show=False),
    ]

    class CursorMoved(Message):
        def __init__(self, rows: int, cols: int) -> None:
            super().__init__()
            self.rows, self.cols = rows, cols

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.view is not None if action == "move" else True  # the tokens have no cells

    def action_move(self, rows: int, cols: int) -> None:
        self.post_message(self.CursorMoved(rows, cols))

    class CellPicked(Message):
        def __init__(self, row: int, col: int) -> None:
            super().__init__()
            self.row, self.col = row, col

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.view: MatrixView | None = None
        self.cursor = (0, 0)
        self.top = self.left = 0
        self.gap = GAP
        self.shown = Window(0, 0, 0, 0)
        self._col_x: list[tuple[int, int, int]] = []  # (x from, x to, column) of the last render
        self._label_width = 0

    def show(self, view: MatrixView | None, cursor: tuple[int, int]) -> None:
        if view is not self.view:
            self.top = self.left = 0
        had_cells = self.view is not None
        self.view, self.cursor = view, cursor
        self.refresh(layout=True)
        if had_cells != (view is not None):  # ←↑↓→ come and go with the cells (the footer is rebuilt)
            self.refresh_bindings()

    def move(self, cursor: tuple[int, int]) -> None:
        self.cursor = cursor
        self.refresh()

    # -- size --------------------------------------------------------------------------------

    def get_content_width(self, container: Size, viewport: Size) -> int:
        """Beside the notes (wide, where the CSS asks for `width: auto`): the matrix's own width, and
        room for the lines under it (a legend's item up to LEGEND_WIDTH, the rest wraps), so the
        notes start next to a small matrix instead of half the screen away. A large matrix takes
        what the CSS's max-width gives it."""
        v = self.view
        if v is None:
            return 0
        n_rows, n_cols = v.M.shape
        if n_rows * n_cols > WIDE_CELLS:
            return container.width
        mk = style.markers(v.opts)
        matrix = 2 + max(cell_len(label) for label in v.rows) + sum(
            GAP + max([cell_len(v.cols[j])] + [cell_len(self._cell_text(v, i, j, mk)) for i in range(n_rows)])
            for j in range(n_cols))
        under = [cell_len(line) for line in self._status(v, Window(0, 0, n_rows, n_cols), n_rows, n_cols)]
        under += [min(cell_len(item), LEGEND_WIDTH) for item in v.legend]
        return max(matrix, *under)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """The whole matrix where it fits above the notes' least room (a sliding window's band
        shows on all 8 rows at 80 × 24), its legend shortened or left out before a row is; a
        larger one gets a window of 60% of the height, so the worked cell and the explanation
        keep room below. Beside the notes (wide), all of the height."""
        if self.view is None:
            return 0
        n = self.view.M.shape[0]
        heights = [TOP_LINES + n + STATUS_LINES + len(legend) for legend in legends(self.view, width, self.app.console)]
        if self.screen.has_class("-wide"):
            return heights[0]
        room = container.height - NOTES_MIN
        fits = [h for h in heights if h <= room] + ([TOP_LINES + n + 1] if TOP_LINES + n + 1 <= room else [])
        if fits:
            return fits[0]
        return min(heights[0], max(container.height * 3 // 5, TOP_LINES + 1 + STATUS_LINES))

    # -- drawing -----------------------------------------------------------------------------

    def _window(self, width: int, height: int, texts) -> Window:
        """The rows and columns that fit, moved as little as needed to keep the cursor in view
        (gridfit.columns)."""
        v = self.view
        n_rows = v.M.shape[0]
        r = self.cursor[0]
        rows = max(1, min(n_rows, height))
        if r < self.top:
            self.top = r
        elif r >= self.top + rows:
            self.top = r - rows + 1
        self.top = max(0, min(self.top, n_rows - rows))
        self.left, count, self.gap = columns(v, self.cursor, self.left, width - self._label_width, texts)
        return Window(self.top, self.left, rows, count)

    def render(self) -> Text:
        v = self.view
        if v is None:
            return Text("")
        width, height = self.size
        legend, second = fit(v, width, height, self.app.console)
        room_rows = max(1, height - TOP_LINES - (STATUS_LINES if second else 1) - len(legend))
        n_rows, n_cols = v.M.shape
        mk = style.markers(v.opts)
        r_cur, c_cur = self.cursor
        # Row labels: all rows could scroll into view, so measure the ones near the window only.
        probe = range(max(0, self.top - room_rows), min(n_rows, self.top + 2 * room_rows))
        self._label_width = 2 + max([cell_len(v.rows[i]) for i in probe] + [1])
        cache: dict[int, list[str]] = {}
        top_guess = max(0, min(max(self.top, r_cur - room_rows + 1), n_rows - room_rows))
        rows_guess = range(min(top_guess, r_cur), min(n_rows, max(top_guess, r_cur) + room_rows))

        def cells(j: int) -> list[str]:
            if j not in cache:
                cache[j] = [self._cell_text(v, i, j, mk) for i in rows_guess]
            return cache[j]

        widths_near: dict[int, int] = {}

        def col_width(j: int) -> int:
            if j not in widths_near:
                widths_near[j] = max([cell_len(v.cols[j])] + [cell_len(s) for s in cells(j)])
            return widths_near[j]

        win = self._window(width, room_rows, col_width)
        rows = range(win.top, win.top + win.rows)
        cols = range(win.left, min(n_cols, win.left + win.cols))
        widths = {j: max([cell_len(v.cols[j])] + [cell_len(self._cell_text(v, i, j, mk)) for i in rows])
                  for j in cols}
        # the columns were chosen by the rows near the cursor; a row in view may have a longer
        # label (t95 after t9) or a wider number ("-14.6266"): drop columns until the lines fit,
        # the cursor's column kept
        self._label_width = max(self._label_width, 2 + max(cell_len(v.rows[i]) for i in rows))
        while len(cols) > 1 and self._label_width + sum(self.gap + widths[j] for j in cols) > width:
            cols = range(cols.start + 1, cols.stop) if cols.stop - 1 == c_cur else range(cols.start, cols.stop - 1)
        win = win._replace(left=cols.start, cols=len(cols))
        self.left = cols.start
        self.shown = win
        block = v.M[win.top:win.top + win.rows, cols.start:cols.stop]  # (rows, cols) in view
        finite = block[np.isfinite(block)]
        top_abs = float(np.max(np.abs(finite))) if finite.size else 0.0
        maxima = (row_maxima(v.M[win.top:win.top + win.rows]) if v.kind == WEIGHTS else None)

        out = Text(no_wrap=True, overflow="crop", end="")
        out.append(" " * self._label_width)
        self._col_x = []
        x = self._label_width
        for j in cols:
            pad = 1 + cell_len(mk.row_max) if v.kind == WEIGHTS else 0  # over the number, not its ▲
            # padded by display cells, not characters (a Chinese label is two cells a character),
            # and never wider than the column: a long label takes the room over the ▲ first
            pad = max(0, min(pad, widths[j] - cell_len(v.cols[j])))
            label = " " * (widths[j] - pad - cell_len(v.cols[j])) + v.cols[j] + " " * pad
            out.append(" " * self.gap + label, style=CURSOR if j == c_cur else style.HEADER)
            self._col_x.append((x, x + self.gap + widths[j], j))
            x += self.gap + widths[j]
        out.append("\n")
        out.append("─" * min(x, width) if not v.opts.ascii else "-" * min(x, width), style=style.NOTE)
        out.append("\n")
        for k, i in enumerate(rows):
            query = i == r_cur
            mark = (">" if v.opts.ascii else "▸") if query else " "
            label = v.rows[i]
            out.append(f"{mark} " + label + " " * (self._label_width - 2 - cell_len(label)),
                       style="bold" if query else style.HEADER)
            for j in cols:
                value = float(v.M[i, j])
                body = self._cell_text(v, i, j, mk)
                if maxima is not None and maxima[k, j]:
                    body = body[:len(body) - 1 - cell_len(mk.row_max)] + " " + mk.row_max
                cell_style = self._cell_style(v, i, j, value, top_abs)
                if v.changed is not None and v.changed[i, j]:
                    cell_style = f"{cell_style} {CHANGED}".strip()
                if (i, j) == (r_cur, c_cur):
                    cell_style = CURSOR
                out.append(" " * self.gap)
                out.append(body.rjust(widths[j]), style=cell_style)
            out.append("\n")
        for line in self._status(v, win, n_rows, n_cols)[:STATUS_LINES if second else 1]:
            out.append(line, style=style.NOTE)
            out.append("\n")
        out.rstrip()
        for line in legend:
            out.append("\n")
            out.append_text(line)
        return out

    def _cell_text(self, v: MatrixView, i: int, j: int, mk) -> str:
        value = float(v.M[i, j])
        if v.allowed is not None and not v.allowed[i, j] and value == 0.0:
            return mk.times  # a masked weight: marked, not 0.0000 (render/heatmap.py does the same)
        body = style.number(value, v.opts)
        if v.kind == WEIGHTS:  # room for the ▲ beside a row's largest weight, in every cell
            body += " " * (1 + cell_len(mk.row_max))
        return body

    @staticmethod
    def _cell_style(v: MatrixView, i: int, j: int, value: float, top: float) -> str:
        if (v.allowed is not None and not v.allowed[i, j]) or (v.kind == MASKED and np.isneginf(value)):
            return style.MASKED_CELL
        if v.kind == WEIGHTS:
            return style.weight_style(value)
        return style.signed_style(value, top)

    def _status(self, v: MatrixView, win: Window, n_rows: int, n_cols: int) -> list[str]:
        """Two lines: the cursor's cell and value; then where the window is on a matrix that does
        not fit and how many cells m or h changed, or else how to move the cursor."""
        r, c = self.cursor
        value = self._cell_text(v, r, c, style.markers(v.opts)).rstrip()
        if value == style.markers(v.opts).times:  # a masked weight reads as the table marks it
            value = style.say(v.opts, "marks.masked_weight", mark=value)
        first = f"{style.cell_ref(v.symbol, v.rows[r], v.cols[c], v.opts)} = {value}"
        parts = []
        if win.rows < n_rows or win.cols < n_cols:
            last_col = min(n_cols, win.left + win.cols)
            dash = style.plain("–", v.opts)
            parts.append(style.say(v.opts, "app.window", rows=span(win.top, win.top + win.rows - 1, dash),
                                   n_rows=n_rows, cols=span(win.left, last_col - 1, dash), n_cols=n_cols))
        if v.changed is not None and v.changed.any():
            parts.append(style.say(v.opts, "app.changed_count", count=f"{int(v.changed.sum()):,}"))
        second = f" {style.markers(v.opts).dot} ".join(parts) or style.say(v.opts, "app.cursor_hint")
        return [first, second]

    # -- mouse -------------------------------------------------------------------------------

    def on_click(self, event: Click) -> None:
        offset = event.get_content_offset(self)
        if self.view is None or offset is None:
            return
        row = self.shown.top + offset.y - TOP_LINES
        if not self.shown.top <= row < self.shown.top + self.shown.rows:
            return
        for x0, x1, col in self._col_x:
            if x0 <= offset.x < x1:
                self.post_message(self.CellPicked(row, col))
                return
