"""One cell of one stage worked out with the scenario's own numbers, the way the lessons do by hand.

Every product and sum is computed from the unrounded numbers and only then printed at
opts.precision (at least WORKED_DECIMALS), so the last digit of a printed product can differ from
multiplying the printed factors (the total always equals the matrix cell). A negative number after
an operator is bracketed, as the lessons write 3×(-0.6). Every line and table fits the width or
folds at its spaces: no number is ever cut short.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from attnwalk.layer.walk import Walk, rms_normalize
from attnwalk.layer.stages import BY_KEY, TOKENS, Stage
from attnwalk.render import style
from attnwalk.render.fasttable import FastTable
from attnwalk.render.heatmap import dim_labels, token_labels
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import Prose

EXP_SAFE = 700.0  # e^x overflows float64 past ~709.78: beyond this only the stable form is shown
WORKED_DECIMALS = 2  # arithmetic at --precision 0 or 1 would read "172.9 / 243.3 = 1"
FRAME = 4  # a worked panel's border and padding: 2 cells on each side


def axes(walk: Walk, stage: Stage, head: int = 0) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Row and column labels of a stage's matrix: tokens, or dimension indices 0 … d − 1."""
    scn = walk.scenario
    rows = token_labels(scn.key_tokens if stage.rows == "m" else scn.tokens)
    if stage.kind == TOKENS:
        return rows, ()
    if stage.square:
        return rows, token_labels(scn.key_tokens)
    return rows, dim_labels(walk.matrix(stage.key, head).shape[1])


def default_cell(walk: Walk, key: str, head: int = 0) -> tuple[int, int]:
    """The cell a screen works out: the focus row (else the last query), and for query × key
    stages the key that row attends to most."""
    scn = walk.scenario
    stage = BY_KEY[key]
    row = scn.focus if scn.focus is not None else scn.n - 1
    row = min(row, (scn.m if stage.rows == "m" else scn.n) - 1)
    col = int(np.argmax(walk.matrix("A", head)[row])) if stage.square else 0
    return row, col


class Hidden(NamedTuple):
    count: int  # terms left out between two shown ones


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
    """One cell being worked out, with the helpers that write its arithmetic."""

    def __init__(self, walk: Walk, stage: Stage, row: int, col: int, head: int,
                 opts: ViewOptions) -> None:
        self.walk, self.stage, self.row, self.col, self.head, self.opts = walk, stage, row, col, head, opts
        self.scn = self.walk.scenario
        self.mk = style.markers(self.opts)
        self.rows, self.cols = axes(self.walk, self.stage, self.head)
        self.value = float(self.walk.matrix(self.stage.key, self.head)[self.row, self.col])
        self.unrounded = False  # set when a line shows products or powers worth a footnote

    def sym(self, stage_key: str | None = None) -> str:
        """The stage's symbol, bracketed when it is a sum: "(S + M)[撩, 刘海]"."""
        symbol = style.plain(BY_KEY[stage_key or self.stage.key].symbol, self.opts)
        return f"({symbol})" if " " in symbol else symbol

    def ref(self, stage_key: str | None = None) -> str:
        """This cell in another (or this) stage: "QKᵀ[撩, 刘海]"."""
        return f"{self.sym(stage_key)}[{self.rows[self.row]}, {self.cols[self.col]}]"

    def num(self, x: float) -> str:
        return style.number(float(x), self.opts)

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
    stage = BY_KEY[key]
    if stage.kind == TOKENS:
        return Text(style.say(opts, "ui.no_cells"))
    worked = opts.with_(precision=max(opts.precision, WORKED_DECIMALS))
    c = _Cell(walk, stage, row, col, head, worked)
    lines = _EXPLAIN[key](c)
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


def _embedding(c: _Cell) -> list[str]:
    tok, ids = c.rows[c.row], c.scn.main.ids
    E = c.walk.mats["E"][c.row]
    if ids is None:
        return [f"{c.sym()}[{tok}] = {c.vec(E)}"]
    lookup = c.say("ui.lookup", id=ids[c.row])
    return [f"{tok} {c.mk.arrow} {c.say('ui.id')} {ids[c.row]} {c.mk.arrow} {lookup}",
            f"{c.sym()}[{tok}] = EmbeddingTable[{ids[c.row]}] = {c.vec(E)}"]


def _position(c: _Cell) -> list[str]:
    positional = c.scn.main.positional
    if positional == "none":
        return [c.say("ui.no_positional")]
    if positional == "explicit":
        return [c.say("ui.given_positions")]
    pos, j, d = c.row, c.col, c.scn.d_model
    i = j // 2
    fn = "sin" if j % 2 == 0 else "cos"
    denominator = 10000.0 ** (2 * i / d)
    angle = pos / denominator
    short = lambda x: style.short(x, c.opts)  # noqa: E731
    steps = f"PE({pos}, {j}) = {fn}({pos} / 10000^({2 * i}/{d}))"
    if denominator != 1.0:
        steps += f" = {fn}({pos} / {short(denominator)})"
    steps += f" = {fn}({short(angle)}) = {c.num(c.value)}"
    if j % 2 == 0:
        where = c.say("ui.position_even",
                      pos=pos, i=i, col=j)
    else:
        where = c.say("ui.position_odd",
                      pos=pos, i=i, col=j)
    return [where, steps]


def _input(c: _Cell) -> list[str]:
    tok, r, j = c.rows[c.row], c.row, c.col
    E, P, X = (c.walk.mats[k][r] for k in ("E", "P", "X"))
    return [*c.chain(f"X[{tok}] = E[{tok}] + P[{tok}]", f"{c.vec(E)} + {c.vec(P)}", c.vec(X)),
            c.say("ui.aside",
                  text=f"E[{tok}, {j}] + P[{tok}, {j}] = {c.num(E[j])} + {c.operand(P[j])} = {c.num(X[j])}",
                  note=c.say("ui.elementwise"))]


def _projection(c: _Cell) -> list[str]:
    key = c.stage.key
    W = {"Q": c.scn.W_Q, "K": c.scn.W_K, "V": c.scn.W_V}[key]
    from_source = key != "Q" and bool(c.walk.source)  # cross-attention: K and V read the source
    X = c.walk.source["X"] if from_source else c.walk.mats["X"]
    x_name = "X_src" if from_source else "X"
    x, w = X[c.row], W[:, c.col]
    tok = c.rows[c.row]
    lines = [f"{x_name}[{tok}] = {c.vec(x)}", f"W_{key}[:, {c.col}] = {c.vec(w)}"]
    if c.scn.heads > 1:
        width = W.shape[1] // c.scn.heads
        lines.append(c.say("ui.head_column", head=c.col // width + 1,
                           heads=c.scn.heads, col=c.col % width, width=width, matrix=f"W_{key}",
                           shape=f"{W.shape[0]} {c.mk.times} {W.shape[1]}"))
    return lines + c.dot(f"{x_name}[{tok}] {c.mk.dot} W_{key}[:, {c.col}]", x, w, c.value)


def _scores(c: _Cell) -> list[str]:
    hd = c.walk.heads[c.head].mats
    q, k = hd["Q"][c.row], hd["K"][c.col]
    qt, kt = c.rows[c.row], c.cols[c.col]
    lines = [f"q_{qt} = {c.vec(q)}", f"k_{kt} = {c.vec(k)}"]
    qn, kn = "q", "k"
    if c.scn.qk_norm:
        qn, kn = ("q^", "k^") if c.opts.ascii else ("q̂", "k̂")
        q, k = rms_normalize(q[None, :])[0], rms_normalize(k[None, :])[0]  # (d_k,) each
        lines += [c.say("ui.qk_norm_cell"),
                  f"{qn}_{qt} = {c.vec(q)}", f"{kn}_{kt} = {c.vec(k)}"]
    if c.scn.score == "additive":
        t = np.tanh(q + k)  # (d_k,)
        lines += [f"tanh({qn}_{qt} + {kn}_{kt}) = {c.vec(t)}", f"w_a = {c.vec(c.scn.w_a)}"]
        q, k, lhs = t, c.scn.w_a, f"tanh({qn} + {kn}) {c.mk.dot} w_a"
    else:
        lhs = f"{qn}_{qt} {c.mk.dot} {kn}_{kt}"
    if c.scn.qk_norm and c.scn.qk_scale != 1.0:  # the scale multiplies the finished score
        dot = float(np.dot(q, k))
        return lines + c.dot(lhs, q, k, dot) + [
            f"{c.num(dot)} {c.mk.times} qk_scale {style.short(c.scn.qk_scale, c.opts)} "
            f"= {c.num(c.value)}"]
    return lines + c.dot(lhs, q, k, c.value)


def _scaled(c: _Cell) -> list[str]:
    raw = float(c.walk.matrix("QK^T", c.head)[c.row, c.col])
    qkt = c.ref("QK^T")
    if c.scn.score == "additive":
        return [c.say("ui.additive_unscaled")
                + f" = {c.num(raw)}"]
    if c.walk.mode == "unscaled":
        return [c.say("ui.unscaled_cell")
                + c.colon() + f"{qkt} = {c.num(raw)}"]
    d_k = c.scn.d_k
    rt = c.mk.sqrt
    lines = [f"{qkt} / {rt}d_k = {c.num(raw)} / {rt}{d_k} = "
             f"{c.num(raw)} / {c.num(c.walk.scale)} = {c.num(c.value)}"]
    if c.scn.qk_norm:
        lines.append(c.say("ui.qk_norm_scaled"))
    if c.walk.mode == "uniform":
        lines.append(c.say("ui.uniform_ignores"))
    return lines


def _masked(c: _Cell) -> list:
    S = float(c.walk.matrix("S", c.head)[c.row, c.col])
    lines = []
    if c.walk.amplify != 1.0:
        S *= c.walk.amplify
        lines.append(c.say("ui.amplified_score",
                           k=style.short(c.walk.amplify, c.opts), value=c.num(S)))
    if c.scn.allowed[c.row, c.col]:
        return lines + [f"S + M = {c.num(S)} + 0 = {c.num(c.value)}"]
    why = c.say("ui.masked_cell")
    if c.scn.mask_kind == "causal":
        why += " " + c.say("ui.causal_cell",
                           col=c.col + 1, row=c.row + 1)
    return lines + [f"S + M = {c.num(S)} + ({c.mk.neg_inf}) = {c.mk.neg_inf}", Prose(why)]


def _softmax(c: _Cell) -> list:
    SM = c.walk.matrix("S+M", c.head)[c.row]  # (m,) the row softmax sees, amplified if asked
    allowed = c.scn.allowed[c.row]
    tok, mode = c.rows[c.row], c.walk.mode
    if mode == "uniform":
        count = int(allowed.sum())
        if not allowed[c.col]:
            return [Prose(c.say("ui.masked_cell"))]
        return [Prose(c.say("ui.uniform_cell", count=count)), f"1 / {count} = {c.num(c.value)}"]
    if mode == "hard":
        best = int(np.argmax(SM))
        return [Prose(c.say("ui.hard_cell")),
                f"max = {c.sym('S+M')}[{tok}, {c.cols[best]}] = {c.num(SM[best])}"]
    top = float(np.max(SM))
    name = c.sym("S+M" if c.scn.masked else "S")
    lines: list = [f"{name}[{tok}] = {c.vec(SM)}"]
    if c.walk.amplify != 1.0:
        lines.append(c.say("ui.amplified_row",
                           k=style.short(c.walk.amplify, c.opts)))
    naive = top <= EXP_SAFE
    c.unrounded = True
    m = len(SM)
    with np.errstate(over="ignore"):
        e = np.exp(SM)  # (m,) the lesson's form: only printed when nothing overflows
        stable = np.exp(SM - top)  # (m,) every exponent ≤ 0
    minus = c.mk.minus
    top_text = c.num(top) if top >= 0 else f"({c.num(top)})"
    heads = ["", "e^s"] if naive else [""]
    heads.append(f"e^(s {minus} max)")
    rows: list[tuple[Text, list[Text]]] = []  # per key: its label, then its exponentials
    for j in elided(m, also=c.col):
        if isinstance(j, Hidden):
            more = c.say("ui.more_terms", count=j.count)
            rows.append((Text(c.mk.ellipsis), [Text(more)]))
        elif not allowed[j]:
            masked = Text(f"e^{c.mk.neg_inf} = 0", style=style.MASKED_CELL)
            rows.append((Text(c.cols[j]), [masked] * (len(heads) - 1)))
        else:
            cells = [Text(f"e^{c.operand(SM[j])} = {style.exp_value(e[j])}")] if naive else []
            cells.append(Text(f"e^({c.num(SM[j])} {minus} {top_text}) = "
                              f"{style.exp_value(stable[j])}"))
            rows.append((Text(c.cols[j]), cells))
    lines.append(_exponentials(heads, rows, c.opts.width - FRAME))
    if not naive:
        lines.append(Prose(c.say("ui.overflow_note", max=c.num(top))))
    row_sum = c.say("ui.row_sum")
    if naive:
        total = float(e.sum())
        parts = c.terms({j: style.exp_value(e[j]) for j in _shown(m)}, m)
        lines.append(f"{row_sum} = {parts} = {style.exp_value(total)}")
        lines.append(f"{c.cols[c.col]}{c.colon()}{style.exp_value(e[c.col])} / "
                     f"{style.exp_value(total)} = {c.num(c.value)}")
    total = float(stable.sum())
    lines.append(c.say("ui.exponentials",
                       max=c.num(top)) + f"{c.colon()}{row_sum} = {style.exp_value(total)}, "
                 f"{style.exp_value(stable[c.col])} / {style.exp_value(total)} = {c.num(c.value)}")
    return lines


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


def _output(c: _Cell) -> list[str]:
    a = c.walk.matrix("A", c.head)[c.row]  # (m,)
    V = c.walk.heads[c.head].mats["V"]  # (m, d_v)
    tok, t = c.rows[c.row], c.mk.times
    lines = c.dot(f"A[{tok}] {c.mk.dot} V[:, {c.col}]", a, V[:, c.col], c.value)
    m = len(a)
    whole = c.terms({j: f"{c.num(a[j])} {t} {c.vec(V[j])}" for j in _shown(m)}, m)
    Z = c.walk.matrix("Z", c.head)[c.row]
    return lines + c.chain(f"{c.sym()}[{tok}] = {whole}", c.vec(Z))


def _concat(c: _Cell) -> list[str]:
    d_v = c.scn.d_v
    h, j = divmod(c.col, d_v)
    return [c.say("ui.concat_cell",
                  col=c.col, j=j, head=h + 1)
            + f"{c.colon()}Z_{h + 1}[{c.rows[c.row]}, {j}] = {c.num(c.value)}"]


def _projected(c: _Cell) -> list[str]:
    concat = c.walk.mats.get("concat", c.walk.mats.get("Z"))[c.row]
    w = c.scn.W_O[:, c.col]
    tok = c.rows[c.row]
    return [f"concat[{tok}] = {c.vec(concat)}", f"W_O[:, {c.col}] = {c.vec(w)}",
            *c.dot(f"concat[{tok}] {c.mk.dot} W_O[:, {c.col}]", concat, w, c.value)]


_EXPLAIN = {
    "E": _embedding, "P": _position, "X": _input, "Q": _projection, "K": _projection,
    "V": _projection, "QK^T": _scores, "S": _scaled, "S+M": _masked, "A": _softmax, "Z": _output,
    "concat": _concat, "O": _projected,
}
