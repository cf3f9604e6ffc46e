"""One cell of one stage worked out with the scenario's own numbers, the way the lessons do by hand.

Every product and sum is computed from the unrounded numbers and only then printed at
opts.precision (at least WORKED_DECIMALS), so the last digit of a printed product can differ from
multiplying the printed factors (the total always equals the matrix cell). A negative number after
an operator is bracketed, as the lessons write 3×(-0.6). Every line and table fits the width or
folds at its spaces: no number is ever cut short.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

import numpy as np

from attnwalk.layer.axes import axes
from attnwalk.layer.cells import Hidden
from attnwalk.layer.stages import TOKENS, Stage
from attnwalk.layer.walk import Walk
from attnwalk.render import style
from attnwalk.render.fasttable import FastTable
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import Prose

WORKED_DECIMALS = 2  # arithmetic at --precision 0 or 1 would read "172.9 / 243.3 = 1"
FRAME = 4  # a worked panel's border and padding: 2 cells on each side


def elided(count: int, also: int | None = None) -> list[int | Hidden]:
    """Indices of a long sum worth printing: all, or the first and last few (and `also`)."""
    if count <= style.LONG_SUM:
        return list(range(count))
    half = style.LONG_SUM_SHOWN // 2
    keep = sorted({*range(half), *range(count - half, count), *([also] if also is not None else [])})
    out: list[int | Hidden] = []
    for prev, i in zip([-1, *keep], keep):
        if i - prev > 1:
            out.append(Hidden(i - prev - 1))
        out.append(i)
    return out


class _Cell:
    """One cell being worked out, with the helpers that write its arithmetic: the Cell that the
    stages' recipes (layer/cells.py) write with, in the walk's precision, markers and language."""

    def __init__(self, walk: Walk, stage: Stage, row: int, col: int, head: int,
                 opts: ViewOptions) -> None:
        self.walk, self.stage, self.row, self.col, self.head, self.opts = walk, stage, row, col, head, opts
        self.scn = self.walk.scenario
        self.mk = style.markers(self.opts)
        self.rows, self.cols = axes(self.walk, self.stage, self.head, opts.lang)
        self.value = float(self.walk.matrix(self.stage.key, self.head)[self.row, self.col])
        self.unrounded = False  # set when a line shows products or powers worth a footnote
        self.hat = "^" if opts.ascii else "\u0302"  # QK-norm's q̂

    def sym(self, stage_key: str | None = None) -> str:
        """The stage's symbol, bracketed when it is a sum: "(S + M)[撩, 刘海]"."""
        stage = self.stage if stage_key is None else self.walk.stage(stage_key)
        symbol = style.plain(stage.symbol, self.opts)
        return f"({symbol})" if " " in symbol else symbol

    def ref(self, stage_key: str | None = None) -> str:
        """This cell in another (or this) stage: "QKᵀ[撩, 刘海]"."""
        return f"{self.sym(stage_key)}[{self.rows[self.row]}, {self.cols[self.col]}]"

    def num(self, x: float) -> str:
        return style.number(float(x), self.opts)

    def short(self, x: float) -> str:
        return style.short(x, self.opts)

    def exp(self, x: float) -> str:
        return style.exp_value(x)

    def prose(self, sentence: str) -> Prose:
        return Prose(sentence)

    def elided(self, count: int, also: int | None = None) -> list[int | Hidden]:
        return elided(count, also)

    def exponentials(self, heads: list[str], rows: list[tuple[str, list[str | None]]]) -> FastTable:
        """The softmax's exponentials per key; None stands for a masked key's e^−∞ = 0."""
        masked = Text(f"e^{self.mk.neg_inf} = 0", style=style.MASKED_CELL)
        return _exponentials(heads, [(Text(label), [masked if c is None else Text(c) for c in cells])
                                     for label, cells in rows], self.opts.width - FRAME)

    def operand(self, x: float) -> str:
        """A number after an operator: bracketed when negative, "2.8415 × (-0.6000)"."""
        out = self.num(x)
        return f"({out})" if out.startswith("-") else out

    def vec(self, v: np.ndarray) -> str:
        parts = [self.num(v[i]) if isinstance(i, int) else self.mk.ellipsis for i in elided(len(v))]
        return "[" + ", ".join(parts) + "]"

    def say(self, key: str, **values: object) -> str:
        return style.say(self.opts, key, **values)

    def colon(self) -> str:
        """What joins a label to the math after it: ": ", in Chinese "："."""
        return self.say("ui.colon")

    def terms(self, items: list[str] | dict[int, str], count: int, sep: str = " + ") -> str:
        """items[i] joined by sep, eliding the middle of long sums with a count of the rest."""
        out = []
        for i in elided(count):
            out.append(items[i] if isinstance(i, int) else
                       self.say("ui.more_terms", count=i.count))
        return sep.join(out)

    def dot(self, lhs: str, a: np.ndarray, b: np.ndarray, total: float) -> list[str]:
        """lhs = a0 × b0 + a1 × b1 + … = p0 + p1 + … = total, over two lines if too wide."""
        t = self.mk.times
        d = len(a)
        self.unrounded = True
        lead = {i: self.num if i == 0 else self.operand for i in _shown(d)}  # "-1.7 + (-0.3)"
        factors = self.terms({i: f"{lead[i](a[i])} {t} {self.operand(b[i])}" for i in _shown(d)}, d)
        if d == 1:
            return [f"{lhs} = {factors} = {self.num(total)}"]
        products = self.terms({i: lead[i](a[i] * b[i]) for i in _shown(d)}, d)
        return self.chain(f"{lhs} = {factors}", f"{products} = {self.num(total)}")

    def chain(self, first: str, *rest: str) -> list[str]:
        """first = rest[0] = … on one line if it fits the panel, else each "= …" on its own."""
        line = " = ".join((first, *rest))
        if cell_len(line) <= self.opts.width - FRAME:
            return [line]
        return [first, *(f"    = {part}" for part in rest)]


def _shown(count: int) -> list[int]:
    return [i for i in elided(count) if isinstance(i, int)]


def worked_cell(walk: Walk, key: str, row: int, col: int, head: int,
                opts: ViewOptions) -> RenderableType:
    """A panel working out cell [row, col] (0-based) of stage `key` for head `head`."""
    stage = walk.stage(key)
    if stage.worked is None:
        return Text(style.say(opts, "ui.no_cells"))
    worked = opts.with_(precision=max(opts.precision, WORKED_DECIMALS))
    c = _Cell(walk, stage, row, col, head, worked)
    lines = stage.worked(c)
    # The arithmetic breaks only at its spaces (keeping numbers and token labels whole); prose
    # lines come as Prose, which breaks Chinese between characters
    body = [Text(line) if isinstance(line, str) else line for line in lines]
    body.append(Text(f"{c.ref()} = {c.num(c.value)}", style=style.RESULT))
    if c.unrounded:
        body.append(Prose(c.say("ui.unrounded_note"), style=style.NOTE))
    if worked.precision != opts.precision:
        body.append(Prose(c.say("ui.worked_decimals", decimals=worked.precision,
                                precision=opts.precision), style=style.NOTE))
    # Named by its row and column labels, as the tables show them: E[撩, 0], QKᵀ[撩, 刘海], the#4
    title = c.say("ui.worked_cell") + c.colon() + c.ref()
    return Panel(Group(*body), title=Text(title), title_align="left", box=style.panel_box(opts),
                 border_style=style.WORKED_BORDER, expand=False)


def _exponentials(heads: list[str], rows: list[tuple[Text, list[Text]]], room: int) -> FastTable:
    """Each key's exponentials in columns under their headings ("e^s", "e^(s − max)") when that
    fits in `room` cells, else each under its key's label on lines of its own, where a line still
    too long folds at its spaces: the numbers are always printed whole."""
    gap = 3
    widths = [cell_len(h) for h in heads]
    for label, cells in rows:
        if len(cells) == len(heads) - 1:
            for k, cell in enumerate([label, *cells]):
                widths[k] = max(widths[k], cell.cell_len)
    if sum(widths) + gap * (len(widths) - 1) <= room:
        grid = FastTable(box=None, padding=(0, gap, 0, 0), pad_edge=False, header_style=style.NOTE)
        for head in heads:
            grid.add_column(Text(head), no_wrap=True)
        for label, cells in rows:
            grid.add_row(label, *cells, *([None] * (len(heads) - 1 - len(cells))))
        return grid
    grid = FastTable(box=None, padding=(0, gap, 0, 0), pad_edge=False, show_header=False)
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for label, cells in rows:
        for k, cell in enumerate(cells):
            if k == 0 or cell is not cells[k - 1]:  # a masked key's "e^−∞ = 0" once
                grid.add_row(label if k == 0 else None, cell)
    return grid


