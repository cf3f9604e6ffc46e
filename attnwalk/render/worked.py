"""One cell of one stage worked out with the scenario's own numbers, the way the lessons do by hand.

Every printed equation holds for the digits printed, so a learner can check each line with a
calculator: a product is of the factors as shown, a sum of the terms as shown, e^x of the x shown.
Rounded inputs can still move the end of such a chain off the table's value, so a cell that would
land elsewhere is worked again: first with a guard digit on its products, then with one more
decimal throughout (up to MORE_DECIMALS more), saying so; the result line is always the table's
value, at opts.precision (at least WORKED_DECIMALS). A negative number after an operator is
bracketed, as the lessons write 3×(-0.6). Every line and table fits the width or folds at its
spaces: no number is ever cut short.
"""

from __future__ import annotations

import functools
import math
from operator import mul
from typing import TYPE_CHECKING
from decimal import ROUND_HALF_EVEN, Decimal

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

import numpy as np

from attnwalk.features import stage_named
from attnwalk.layer.cells import Hidden
from attnwalk.layer.stages import TOKENS, Stage
from attnwalk.layer.walk import Walk
from attnwalk.render import style
from attnwalk.render.fasttable import FastTable
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import Prose

if TYPE_CHECKING:
    from attnwalk.layer.headview import HeadView

WORKED_DECIMALS = 2  # arithmetic at --precision 0 or 1 would read "172.9 / 243.3 = 1"
MORE_DECIMALS = 4  # how many decimals a cell may add so its arithmetic lands on the table's value
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

    def __init__(self, view: HeadView, stage: Stage, row: int, col: int,
                 opts: ViewOptions, target: ViewOptions, guard: int = 0,
                 exact: dict[tuple, list[Decimal]] | None = None) -> None:
        self.walk, self.stage, self.row, self.col, self.head, self.opts = view.walk, stage, row, col, view.head, opts
        self.target = target  # the precision of the result line: the table's (at least WORKED_DECIMALS)
        self.wide = opts.with_(precision=opts.precision + guard)  # products carry `guard` more decimals
        self.scn = self.walk.scenario
        self.mk = style.markers(self.opts)
        self.rows, self.cols = view.axes(stage, opts.lang)
        if opts.ascii and not stage.square:  # dimension names such as a LayerNorm's μ, σ
            self.cols = tuple(style.plain(label, opts) for label in self.cols)
        if opts.ascii and stage.rows not in ("n", "m"):  # a weight's rows are dimensions too (∂L/∂W_Q)
            self.rows = tuple(style.plain(label, opts) for label in self.rows)
        self.value = float(view.matrix(stage.key)[row, col])
        self.missed: tuple[float, float] | None = None  # (a chain's end, where it should land)
        self.cramped = False  # set when the arithmetic needs more decimals to agree with itself
        self.hat = "^" if opts.ascii else "\u0302"  # QK-norm's q̂
        self._products: dict[tuple[bytes, bytes], list[Decimal]] = {}  # products(), by its factors
        # the unrounded products of the printed factors, shared by the tries of one cell
        # (worked_cell): with and without the guard digit the factors print the same
        self._exact = {} if exact is None else exact

    def sym(self, stage_key: str | None = None) -> str:
        """The stage's symbol, bracketed when it is a sum: "(S + M)[撩, 刘海]" (a stage this layer
        lacks, as S + M is with M = 0 where there is no mask, by its usual symbol)."""
        if stage_key is None:
            stage = self.stage
        else:
            stage = self.walk.stage(stage_key) if self.walk.has(stage_key) else stage_named(stage_key)
        return style.bracketed(stage.symbol, self.opts)

    def ref(self, stage_key: str | None = None) -> str:
        """This cell in another (or this) stage: "QKᵀ[撩, 刘海]"."""
        return f"{self.sym(stage_key)}[{self.rows[self.row]}, {self.cols[self.col]}]"

    def num(self, x: float) -> str:
        return style.number(float(x), self.opts)

    def short(self, x: float) -> str:
        return style.short(x, self.opts)

    def exp(self, x: float, digits: int = 4) -> str:
        """x (an exponential) to `digits` significant digits: 4 as the lessons write them."""
        if digits == 4:
            return style.exp_value(x)
        out = f"{x:#.{digits}g}"
        return out[:-1] if out.endswith(".") else out

    def printed(self, x: float) -> float:
        """x as this cell prints it: the number a learner would type into a calculator."""
        return float(self.num(x)) if np.isfinite(x) else float(x)

    def agrees(self, x: float, on: float | None = None) -> bool:
        """Is x, where a chain of shown digits ended, `on` (the cell's value) as the table prints it?"""
        on = self.value if on is None else on
        if not (np.isfinite(x) and np.isfinite(on)):
            return style.number(x, self.target) == style.number(on, self.target)
        shown, table = self.num(x), style.number(on, self.target)
        if "e" in shown + table:  # scientific notation: digit for digit
            return style.number(x, self.target) == table
        # within half a unit of the table's last digit: 2.87235 rounds to 2.8724 as a learner rounds
        gap = abs(Decimal(shown) - Decimal(table))
        return gap <= Decimal(5).scaleb(-self.target.precision - 1)

    def lands(self, x: float, on: float | None = None) -> bool:
        """agrees(x, on); if not, the cell is worked again with more decimals (worked_cell)."""
        ok = self.agrees(x, on)
        if not ok and self.missed is None:
            self.missed = (x, self.value if on is None else on)
        return ok

    def more_decimals(self) -> None:
        """The digits at this precision cannot make the arithmetic agree: work the cell with more."""
        self.cramped = True

    def plain(self, s: str) -> str:
        """Math written with θ, ², √: spelled in ASCII under --ascii."""
        return style.plain(s, self.opts)

    def degrees(self, x: float) -> str:
        return f"{x:.1f}" + (" deg" if self.opts.ascii else "°")

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

    def product(self, x: float) -> str:
        """A product, or a sum of them, as dot() prints it: with the cell's guard digits."""
        return style.number(float(x), self.wide)

    def term(self, x: Decimal) -> str:
        """One product of a sum as dot() prints it: with the guard digits, and a tiny one at fixed
        decimals too (1.4e-07 × 3.68 is 0.00000), so the sum of the terms shown is the sum shown."""
        if not style.scientific(float(x)) or abs(x) >= 1:
            return self.product(float(x))
        return f"{abs(x) if x.is_zero() else x:f}"

    def products(self, a: np.ndarray, b: np.ndarray) -> list[Decimal]:
        """Each a[i] × b[i] of the factors as printed, rounded as printed. In decimal arithmetic, so
        that a tie such as 3.5839 × (-0.5) = -1.79195 rounds one way every time (half to even)."""
        key = (np.asarray(a).tobytes(), np.asarray(b).tobytes())
        if key not in self._products:  # dot() asks twice; a 384-wide row costs ~1 ms a time
            factors = (*key, self.opts.precision)
            if factors not in self._exact:
                self._exact[factors] = list(map(mul, self._as_printed(a), self._as_printed(b)))
            fixed = len(self._exact[factors]) > 1  # terms of a sum: tiny ones at fixed decimals
            self._products[key] = [self._rounded(p, self.wide, fixed) for p in self._exact[factors]]
        return self._products[key]

    def _as_printed(self, v: np.ndarray) -> list[Decimal]:
        """Each entry of `v` as this cell prints it, as a Decimal: formatted once for all the
        cell's tries at this precision. Z's line sums a row of A against each column of V it
        shows, and formatting the same 512 weights for each column was most of a large layer's
        Z cell (96 ms, laid out while the learner presses keys)."""
        key = (np.asarray(v).tobytes(), self.opts.precision)
        if key not in self._exact:
            self._exact[key] = [Decimal(self.num(x)) for x in v]
        return self._exact[key]

    def dot_value(self, a: np.ndarray, b: np.ndarray) -> float:
        """a · b as dot() prints it: the exact sum of the printed products (hidden ones included)."""
        return float(sum(self.products(a, b), Decimal(0)))

    def sum_of_products(self, a: np.ndarray, b: np.ndarray) -> float:
        """a · b straight from the factors as printed, rounded once (as a calculator gives it)."""
        exact = sum(map(mul, self._as_printed(a), self._as_printed(b)), Decimal(0))
        return float(self._rounded(exact, self.opts))

    def rounds_to(self, x: float, y: float) -> bool:
        """Does x, as product() prints it, round to y as num() prints it?"""
        long, short = self.product(x), self.num(y)
        if "e" in long + short:
            return self.num(x) == short
        return abs(Decimal(long) - Decimal(short)) <= Decimal(5).scaleb(-self.opts.precision - 1)

    def _rounded(self, exact: Decimal, opts: ViewOptions, fixed: bool = False) -> Decimal:
        """An exact decimal as printed at opts.precision, a tie rounding half to even; `fixed`: a
        tiny one too (a term of a sum), not in scientific notation."""
        # style.scientific, not "e" in style.number(...): formatting every one of a 384-term
        # sum's products only to look for an "e" took a third of a model walk's worked cells
        value = float(exact)
        if math.isfinite(value) and style.scientific(value) and not (fixed and abs(value) < 1):
            return Decimal(style.number(value, opts))
        return exact.quantize(_quantum(opts.precision), ROUND_HALF_EVEN)

    def dot(self, lhs: str, a: np.ndarray, b: np.ndarray, total: float) -> list[str]:
        """lhs = a0 × b0 + a1 × b1 + … = p0 + p1 + … = a · b, over two lines if too wide: each
        product of the factors as printed, and their sum; `total` is where it should land."""
        t = self.mk.times
        d = len(a)
        p = self.products(a, b)  # (d,)
        end = self.dot_value(a, b)
        if self.lands(end, on=total) and not self._rounds_on(self.product(end), total):
            self.more_decimals()  # agrees() rounds the end once more: 9.987351 is not 9.9873
        lead = {i: self.num if i == 0 else self.operand for i in _shown(d)}  # "-1.7 + (-0.3)"
        factors = self.terms({i: f"{lead[i](a[i])} {t} {self.operand(b[i])}" for i in _shown(d)}, d)
        if d == 1:
            return [f"{lhs} = {factors} = {self.product(end)}"]
        products = self.terms({i: self.term(p[i]) if i == 0 else _bracketed(self.term(p[i]))
                               for i in _shown(d)}, d)
        return self.chain(f"{lhs} = {factors}", f"{products} = {self.product(end)}")

    def _rounds_on(self, shown: str, on: float) -> bool:
        """Does the number printed as `shown` round to `on` as the table prints it?"""
        table = style.number(on, self.target)
        if "e" in shown + table or not np.isfinite(on):
            return True  # scientific notation: agrees() compares it digit for digit
        return abs(Decimal(shown) - Decimal(table)) <= Decimal(5).scaleb(-self.target.precision - 1)

    def chain(self, first: str, *rest: str) -> list[str]:
        """first = rest[0] = … on one line if it fits the panel, else each "= …" on its own."""
        line = " = ".join((first, *rest))
        if cell_len(line) <= self.opts.width - FRAME:
            return [line]
        return [first, *(f"    = {part}" for part in rest)]


@functools.cache
def _quantum(decimals: int) -> Decimal:
    """What a number printed with `decimals` decimals is a multiple of: 0.0001 for 4."""
    return Decimal(1).scaleb(-decimals)


def _bracketed(number: str) -> str:
    return f"({number})" if number.startswith("-") else number


def _shown(count: int) -> list[int]:
    return [i for i in elided(count) if isinstance(i, int)]


def worked_cell(view: HeadView, key: str, row: int, col: int, opts: ViewOptions) -> RenderableType:
    """A panel working out cell [row, col] (0-based) of stage `key` of one head (`view`, a
    layer.headview.HeadView: Walk.view(head))."""
    walk, head = view.walk, view.head
    stage = walk.stage(key)
    if stage.worked is None:
        return Text(style.say(opts, "ui.no_cells"))
    target = opts.with_(precision=max(opts.precision, WORKED_DECIMALS))
    exact: dict[tuple, list[Decimal]] = {}  # the printed factors and their products, by vector
    for more, guard in _LEVELS:
        c = _Cell(view, stage, row, col, target.with_(precision=target.precision + more), target,
                  guard, exact)
        lines = stage.worked(c)
        if c.missed is None and not c.cramped:
            break
    # The arithmetic breaks only at its spaces (keeping numbers and token labels whole); prose
    # lines come as Prose, which breaks Chinese between characters
    body = [Text(line) if isinstance(line, str) else line for line in lines]
    body.append(Text(f"{c.ref()} = {style.number(c.value, target)}", style=style.RESULT))
    if c.missed is not None:  # even MORE_DECIMALS could not absorb the rounding: say where it went
        end, on = c.missed
        body.append(Prose(c.say("geometry.rounded_gap", chain=c.num(end), value=c.num(on)),
                          style=style.NOTE))
    if c.opts.precision > target.precision:
        body.append(Prose(c.say("geometry.more_decimals", decimals=c.opts.precision,
                                precision=opts.precision), style=style.NOTE))
    elif target.precision != opts.precision:
        body.append(Prose(c.say("ui.worked_decimals", decimals=target.precision,
                                precision=opts.precision), style=style.NOTE))
    # Named by its row and column labels, as the tables show them: E[撩, 0], QKᵀ[撩, 刘海], the#4
    title = c.say("ui.worked_cell") + c.colon() + c.ref()
    return Panel(Group(*body), title=Text(title), title_align="left", box=style.panel_box(opts),
                 border_style=style.WORKED_BORDER, expand=False)


# As few decimals as let every chain land on the value: first a guard digit on the products
# (0.0551 × 2.2000 = 0.12122), then one more decimal everywhere, and so on
_LEVELS = tuple((more, guard) for more in range(MORE_DECIMALS + 1) for guard in (0, 1))


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


