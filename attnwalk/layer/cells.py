"""How one cell of each stage is worked out with the scenario's own numbers, as the lessons do by hand.

Each recipe takes a Cell (the cell being worked: its walk, row, column and head) and returns the
lines of arithmetic: strings that break only at their spaces, and `c.prose(...)` for sentences.
The Cell is given by the renderer (render/worked.py), which decides how numbers, vectors and words
are written (precision, ASCII, language); a recipe only says what is computed from what, so no
module here formats, translates or draws.

Every equation a recipe prints must hold for the digits printed: each step is computed from the
previous one as printed (c.printed, c.dot), and c.lands says whether a chain ends on the cell's
value; if one does not, the renderer works the cell again with more decimals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

from attnwalk.layer.geometry import geometry
from attnwalk import numbering
from attnwalk.numbering import shown as person

if TYPE_CHECKING:
    from attnwalk.layer.stages import Stage
    from attnwalk.layer.walk import Walk
    from attnwalk.scenario.scenario import Scenario

EXP_SAFE = 700.0  # e^x overflows float64 past ~709.78: beyond this only the stable form is shown


class Hidden(NamedTuple):
    count: int  # terms left out between two shown ones


class Cell(Protocol):
    """The cell being worked out, and how its arithmetic is written (render/worked.py's _Cell)."""

    walk: Walk
    stage: Stage
    scn: Scenario
    row: int
    col: int
    head: int
    value: float  # the cell itself
    rows: tuple[str, ...]  # row labels (tokens)
    cols: tuple[str, ...]  # column labels (tokens or dimensions)
    mk: Any  # the markers: times, dot, arrow, ellipsis, neg_inf, sqrt, minus
    hat: str  # QK-norm's accent: "\u0302", or "^" in ASCII

    def sym(self, stage_key: str | None = None) -> str: ...  # "(S + M)"
    def ref(self, stage_key: str | None = None) -> str: ...  # "QKᵀ[撩, 刘海]"
    def num(self, x: float) -> str: ...
    def operand(self, x: float) -> str: ...  # bracketed when negative
    def short(self, x: float) -> str: ...  # without trailing zeros
    def exp(self, x: float, digits: int = 4) -> str: ...  # e^x's value, to significant digits
    def printed(self, x: float) -> float: ...  # x as num() prints it
    def agrees(self, x: float, on: float | None = None) -> bool: ...  # x rounds to `on` (the cell)?
    def lands(self, x: float, on: float | None = None) -> bool: ...  # agrees, else more decimals
    def more_decimals(self) -> None: ...  # the digits shown cannot agree: work the cell with more
    def plain(self, s: str) -> str: ...  # θ, ², √ spelled in ASCII under --ascii
    def degrees(self, x: float) -> str: ...  # "45.0°"
    def vec(self, v: np.ndarray) -> str: ...
    def say(self, key: str, **values: object) -> str: ...  # a sentence from the text files
    def colon(self) -> str: ...
    def prose(self, sentence: str) -> Any: ...  # a line that wraps as prose
    def elided(self, count: int, also: int | None = None) -> list[int | Hidden]: ...
    def terms(self, items: dict[int, str], count: int, sep: str = " + ") -> str: ...
    def dot(self, lhs: str, a: np.ndarray, b: np.ndarray, total: float) -> list[str]: ...
    def dot_value(self, a: np.ndarray, b: np.ndarray) -> float: ...  # Σ of dot()'s printed products
    def sum_of_products(self, a: np.ndarray, b: np.ndarray) -> float: ...  # of printed factors, rounded once
    def product(self, x: float) -> str: ...  # a product or dot_value as dot() prints it (guard digits)
    def rounds_to(self, x: float, y: float) -> bool: ...  # product(x) rounds to num(y)?
    def chain(self, first: str, *rest: str) -> list[str]: ...
    def exponentials(self, heads: list[str], rows: list[tuple[str, list[str | None]]]) -> Any: ...


def shown(c: Cell, count: int) -> list[int]:
    return [i for i in c.elided(count) if isinstance(i, int)]


def embedding(c: Cell) -> list:
    tok, ids = c.rows[c.row], c.scn.main.ids
    E = c.walk.mats["E"][c.row]
    if ids is None:
        return [f"{c.sym()}[{tok}] = {c.vec(E)}"]
    lookup = c.say("ui.lookup", id=ids[c.row])
    return [f"{tok} {c.mk.arrow} {c.say('ui.id')} {ids[c.row]} {c.mk.arrow} {lookup}",
            f"{c.sym()}[{tok}] = EmbeddingTable[{ids[c.row]}] = {c.vec(E)}"]


def position(c: Cell) -> list:
    positional = c.scn.main.positional
    if positional == "none":  # a mask or ALiBi carries order instead: their features say so
        return [c.say("ui.no_positional")]
    if positional == "explicit":
        return [c.say("ui.given_positions")]
    if positional == "rope":  # nothing is added to X: the positions turn q and k (Q_rot, K_rot)
        return [c.prose(c.say("rope.p_cell"))]
    # The formula counts from 0 where the tables count from 1: row r is pos = r − 1, and column j
    # (from 1) is the formula's dimension j − 1, which is 2i (sin) or 2i+1 (cos)
    pos, j, d = c.row, c.col, c.scn.d_model
    i = j // 2
    fn, dim = ("sin", "2i") if j % 2 == 0 else ("cos", "2i+1")
    denominator = 10000.0 ** (2 * i / d)
    angle = pos / denominator
    steps = f"P[pos = {pos}, {dim} = {j}] = {fn}({pos} / 10000^({2 * i}/{d}))"
    if denominator != 1.0:
        steps += f" = {fn}({pos} / {c.short(denominator)})"
    steps += f" = {fn}({c.short(angle)}) = {c.num(c.value)}"
    where = c.say("ui.position_even" if j % 2 == 0 else "ui.position_odd", row=person(pos), pos=pos,
                  col=person(j), dim=j, i=i)
    return [c.prose(where), steps]


def input_sum(c: Cell) -> list:
    tok, r, j = c.rows[c.row], c.row, c.col
    col = c.cols[j]  # as the tables label it: 1 … d_model, or the scenario's names
    (e, E), (p, P) = (c.walk.input(c.stage, i) for i in (0, 1))
    E, P, X = E[r], P[r], c.walk.matrix(c.stage.key)[r]
    x = c.sym()
    return [*c.chain(f"{x}[{tok}] = {e}[{tok}] + {p}[{tok}]", f"{c.vec(E)} + {c.vec(P)}", c.vec(X)),
            c.say("ui.aside",
                  text=f"{e}[{tok}, {col}] + {p}[{tok}, {col}] = {c.num(E[j])} + {c.operand(P[j])} = {c.num(X[j])}",
                  note=c.say("ui.elementwise"))]


def projection(c: Cell) -> list:
    """x · W[:, col] (+ b[col]): x is what the stage reads (X; X_src in cross-attention; LN(X)
    behind a norm), W and b what it is made with."""
    stage = c.stage
    x_name, X = c.walk.input(stage, 0)
    x_name = c.sym(x_name)
    W = c.scn.param(stage.params[0])  # (d_model, h·d)
    x, w = X[c.row], W[:, c.col]
    tok, col = c.rows[c.row], c.cols[c.col]  # W's column is the stage's, labelled alike
    lines = [f"{x_name}[{tok}] = {c.vec(x)}", f"{stage.weight}[:, {col}] = {c.vec(w)}"]
    if c.scn.heads > 1 and stage.shared and c.scn.groups < c.scn.heads:  # W_K, W_V: g blocks
        width = W.shape[1] // c.scn.groups
        g = c.col // width
        lines.append(c.say("gqa.head_column", kv_head=person(g), kv_heads=c.scn.groups,
                           col=person(c.col % width), width=width, matrix=stage.weight,
                           shape=f"{W.shape[0]} {c.mk.times} {W.shape[1]}",
                           sharers=c.say("gqa.sep").join(
                               str(numbering.shown(h)) for h in range(c.scn.heads) if c.scn.kv_head(h) == g)))
    elif c.scn.heads > 1:
        width = W.shape[1] // c.scn.heads
        lines.append(c.say("ui.head_column", head=person(c.col // width), heads=c.scn.heads,
                           col=person(c.col % width), width=width, matrix=stage.weight,
                           shape=f"{W.shape[0]} {c.mk.times} {W.shape[1]}"))
    bias = c.scn.param(stage.params[1]) if len(stage.params) > 1 else None
    return lines + _biased(c, f"{x_name}[{tok}] {c.mk.dot} {stage.weight}[:, {col}]", x, w, bias)


def _biased(c: Cell, lhs: str, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> list:
    """x · w, and where the layer has a bias, + b[col]: the sum from the digits printed."""
    b = 0.0 if bias is None else float(bias[c.col])
    lines = c.dot(lhs, x, w, c.value - b)
    if bias is not None:
        dot = c.product(c.dot_value(x, w))
        end = c.printed(float(dot) + c.printed(b))
        c.lands(end)
        lines.append(f"{dot} + {c.stage.params[1]}[{c.cols[c.col]}] = {dot} + {c.operand(b)} = {c.num(end)}")
    return lines + dims_shown(c, len(x))  # a row too wide to print whole: which dimensions are shown


def dims_shown(c: Cell, count: int) -> list:
    """"x has 384 dimensions; the vectors show 1–3 and 382–384", where a vector is elided."""
    shown = [i for i in c.elided(count) if isinstance(i, int)]
    if len(shown) == count:
        return []
    dash = "-" if c.mk.minus == "-" else "–"
    return [c.prose(c.say("model.dims_shown", count=count, shown=numbering.runs(shown, dash)))]


def vector_name(name: str) -> str:
    """A stage's row written as a vector: Q -> q, Q_rot -> q_rot, LN -> ln."""
    return name[:1].lower() + name[1:]


def score_vectors(c: Cell) -> tuple[str, np.ndarray, str, np.ndarray]:
    """The query and key this score compares: what QKᵀ reads (Q and K, or Q_rot and K_rot)."""
    hd = c.walk.heads[c.head].mats
    q_name, k_name = c.stage.reads[0], c.stage.keys[0]
    return vector_name(q_name), hd[q_name][c.row], vector_name(k_name), hd[k_name][c.col]


def scores(c: Cell) -> list:
    """q · k for one query and key, and the same score as |q| × |k| × cos θ."""
    qn, q, kn, k = score_vectors(c)
    qt, kt = c.rows[c.row], c.cols[c.col]
    lines = [f"{qn}_{qt} = {c.vec(q)}", f"{kn}_{kt} = {c.vec(k)}"]
    lines += c.dot(f"{qn}_{qt} {c.mk.dot} {kn}_{kt}", q, k, c.value)
    return lines + geometry(c, q, k, qn, kn, c.dot_value(q, k))


def scaled(c: Cell) -> list:
    name, QKT = c.walk.input(c.stage, 0, c.head)  # QKᵀ, a later block's QKᵀ⁽²⁾
    raw = float(QKT[c.row, c.col])
    qkt = c.ref(name)
    mode = c.walk.mode
    if not c.scn.scorer.divides:
        return [c.say("ui.additive_unscaled") + f" = {c.num(raw)}"]
    if not mode.scales(c.scn.scorer):
        return [c.say("ui.unscaled_cell") + c.colon() + f"{qkt} = {c.num(raw)}"]
    rt = c.mk.sqrt
    quotient = c.printed(c.printed(raw) / c.printed(c.walk.scale))  # of the two numbers shown
    c.lands(quotient)
    lines = [f"{qkt} / {rt}d_k = {c.num(raw)} / {rt}{c.scn.d_k} = "
             f"{c.num(raw)} / {c.num(c.walk.scale)} = {c.num(quotient)}"]
    if not mode.reads_scores:
        lines.append(c.say("ui.uniform_ignores"))
    return lines


def _softmax_reads(c: Cell) -> str:
    """The stage whose row the softmax is shown reading: the masked view (S + M) where the layer
    has one, else what A reads (S, S + B, a feature's stage)."""
    from attnwalk.layer.roles import logits, masked_view

    return (masked_view(c.walk.computed) or logits(c.walk.computed)).key


def softmax(c: Cell) -> list:
    SM = _seen_row(c)  # (m,) what softmax reads: the scores × --amplify, −∞ where masked
    allowed = c.scn.allowed[c.row]
    tok, mode = c.rows[c.row], c.walk.mode
    if not mode.reads_scores:
        count = int(allowed.sum())
        if not allowed[c.col]:
            return [c.prose(c.say("ui.masked_cell"))]
        return [c.prose(c.say("ui.uniform_cell", count=count)), f"1 / {count} = {c.num(c.value)}"]
    if not mode.smooth:
        best = int(np.argmax(SM))
        return [c.prose(c.say("ui.hard_cell")),
                f"max = {c.sym(_softmax_reads(c))}[{tok}, {c.cols[best]}] = {c.num(SM[best])}"]
    # a logit the softmax also normalises over that is no key's (an attention sink): a term of the
    # row's sum, and of its maximum, with no weight of its own in A
    extra = None if c.stage.extra_logit is None else float(c.stage.extra_logit(c.scn, c.head))
    top = float(np.max(SM)) if extra is None else max(float(np.max(SM)), extra)
    name = c.sym(_softmax_reads(c))
    lines: list = [f"{name}[{tok}] = {c.vec(SM)}"]
    if extra is not None:
        lines.append(c.prose(c.say("ui.sink_row", value=c.num(extra))))
    if c.walk.amplify != 1.0:
        lines.append(c.say("ui.amplified_row", k=c.short(c.walk.amplify)))
    # the lesson's form e^s / Σ e^s only where e^max is an ordinary float64: past +700 it overflows,
    # below −700 every e^s of the row underflows toward 0 and the sum is 0 (a 3e38 norm weight)
    naive = -EXP_SAFE <= top <= EXP_SAFE
    m = len(SM)
    # Every power is of the score as shown, so e^3.5002 = 33.12 checks on a calculator; the
    # exponentials of each form carry as many digits as let its quotients land on the table's
    # weights, every allowed key's of the row: one precision along the row, whichever cell is
    # worked (the lesson's e^3.5002 = 33.12 keeps its 4 digits, while e^(s − max) may need more)
    s = np.array([c.printed(x) for x in SM])  # (m,) −∞ where masked
    top_s = c.printed(top)
    x = None if extra is None else c.printed(extra)
    with np.errstate(over="ignore"):
        e = np.exp(s)  # (m,) the lesson's form: only printed when nothing overflows
        stable = np.exp(s - top_s)  # (m,) every exponent ≤ 0
        e_x = None if x is None else float(np.exp(x))
        stable_x = None if x is None else float(np.exp(x - top_s))
    weights = c.walk.matrix(c.stage.key, c.head)[c.row]  # (m,) this stage's: A, a later block's A⁽²⁾
    keys = [j for j in range(m) if allowed[j]]
    def row_digits(form: np.ndarray, form_x: float | None) -> int:
        for d in EXP_DIGITS:  # the row rounded once per precision: every key's quotient shares it
            shown_e, total = _rounded(c, form, d, form_x)
            sink_ok = form_x is None or _lands(c, [c.printed(float(c.exp(form_x, d)) / total)],
                                               1.0 - float(weights.sum()))  # and a sink's share
            if sink_ok and all(_lands(c, [c.printed(shown_e[j] / total)], weights[j]) for j in keys):
                return d
        return 4
    naive_d, digits = row_digits(e, e_x) if naive else 4, row_digits(stable, stable_x)
    minus = c.mk.minus
    top_text = c.num(top) if top >= 0 else f"({c.num(top)})"
    heads = ["", "e^s"] if naive else [""]
    heads.append(f"e^(s {minus} max)")
    rows: list[tuple[str, list[str | None]]] = []  # per key: its label, then its exponentials
    for j in c.elided(m, also=c.col):
        if isinstance(j, Hidden):
            rows.append((c.mk.ellipsis, [c.say("ui.more_terms", count=j.count)]))
        elif not allowed[j]:
            rows.append((c.cols[j], [None] * (len(heads) - 1)))  # None: masked, e^−∞ = 0
        else:
            cells = [f"e^{c.operand(SM[j])} = {c.exp(e[j], naive_d)}"] if naive else []
            cells.append(f"e^({c.num(SM[j])} {minus} {top_text}) = {c.exp(stable[j], digits)}")
            rows.append((c.cols[j], cells))
    if x is not None:  # the sink's term: in the sum, no key's weight
        cells = [f"e^{c.operand(x)} = {c.exp(e_x, naive_d)}"] if naive else []
        cells.append(f"e^({c.num(x)} {minus} {top_text}) = {c.exp(stable_x, digits)}")
        rows.append((c.say("ui.sink"), cells))
    lines.append(c.exponentials(heads, rows))
    if not naive:
        lines.append(c.prose(c.say("ui.overflow_note" if top > 0 else "ui.underflow_note", max=top_text)))
    row_sum = c.say("ui.row_sum")
    if naive:
        shown_e, total, weight = _quotient(c, e, naive_d, e_x)
        c.lands(weight)
        parts = c.terms({j: c.exp(e[j], naive_d) for j in shown(c, m)}, m)
        if x is not None:
            parts += f" + {c.exp(e_x, naive_d)}"
        lines.append(f"{row_sum} = {parts} = {c.exp(total, naive_d)}")
        lines.append(f"{c.cols[c.col]}{c.colon()}{c.exp(shown_e, naive_d)} / {c.exp(total, naive_d)}"
                     f" = {c.num(weight)}")
    shown_e, total, weight = _quotient(c, stable, digits, stable_x)
    c.lands(weight)
    # two lines, as the form above: the sum, then the weight (one line broke inside "a / b")
    lines.append(c.say("ui.exponentials", max=c.num(top)) + f"{c.colon()}{row_sum} = {c.exp(total, digits)}")
    lines.append(f"{c.cols[c.col]}{c.colon()}{c.exp(shown_e, digits)} / {c.exp(total, digits)} = {c.num(weight)}")
    more = max(digits, naive_d)
    if more > EXP_DIGITS[0]:  # more digits than the lessons' 4 beside the tables: say why
        lines.append(c.prose(c.say("ui.exp_digits", digits=more, usual=EXP_DIGITS[0])))
    if x is not None:  # what the sink takes: the row sums to 1 minus it
        sink = float(c.exp(stable_x, digits))
        share = c.printed(sink / total)
        lines.append(f"{c.say('ui.sink')}{c.colon()}{c.exp(stable_x, digits)} / {c.exp(total, digits)} = "
                     f"{c.num(share)}")
        lines.append(c.prose(c.say("ui.sink_share", share=c.num(share), rest=c.num(c.printed(1 - share)))))
    return lines


def _lands(c: Cell, weights: list[float], on: float | None = None) -> bool:
    """Both forms of the softmax print one weight, and it rounds to the table's (`on`, else the
    cell's)."""
    return len({c.num(w) for w in weights}) == 1 and c.agrees(weights[0], on)


EXP_DIGITS = range(4, 11)  # significant digits tried for the exponentials, fewest (the lessons' 4) first


def _quotient(c: Cell, e: np.ndarray, digits: int, extra: float | None = None) -> tuple[float, float, float]:
    """This cell's exponential, the row sum and their quotient, each from the digits shown before
    it: the exponentials to `digits` significant digits, their sum to as many, the quotient as a
    weight."""
    shown_e, total = _rounded(c, e, digits, extra)
    return float(shown_e[c.col]), total, c.printed(shown_e[c.col] / total)


def _rounded(c: Cell, e: np.ndarray, digits: int, extra: float | None = None) -> tuple[np.ndarray, float]:
    """The exponentials as shown to `digits` significant digits ((m,), 0 where masked) and their
    sum to as many (with the extra logit's term, an attention sink's): what every key's quotient
    in the row is worked from."""
    shown_e = np.array([float(c.exp(x, digits)) for x in e])
    more = 0.0 if extra is None else float(c.exp(extra, digits))
    return shown_e, float(c.exp(float(np.sum(shown_e)) + more, digits))


def _seen_row(c: Cell) -> np.ndarray:
    """The row of scores softmax saw: what A reads (S, or S + B) × --amplify, −∞ where masked."""
    S = c.walk.input(c.stage, 0, c.head)[1][c.row]  # (m,)
    return np.where(c.scn.allowed[c.row], S * c.walk.amplify, -np.inf)


def output(c: Cell) -> list:
    a = c.walk.input(c.stage, 0, c.head)[1][c.row]  # (m,) the weights
    V = c.walk.input(c.stage, 1, c.head)[1]  # (m, d_v) the values it reads
    tok, t = c.rows[c.row], c.mk.times
    lines = c.dot(f"A[{tok}] {c.mk.dot} V[:, {c.cols[c.col]}]", a, V[:, c.col], c.value)
    m = len(a)
    whole = c.terms({j: f"{c.num(a[j])} {t} {c.vec(V[j])}" for j in shown(c, m)}, m)
    Z = c.walk.matrix(c.stage.key, c.head)[c.row]  # (d_v,) this stage's: Z, a later block's Z⁽²⁾
    # as a learner checks this line: each weight shown times each row of V shown, summed (only
    # the entries the line prints: the middle of a long vector is elided)
    shown_Z = Z.copy()  # (d_v,)
    for i in {*shown(c, len(Z)), c.col}:
        shown_Z[i] = c.sum_of_products(a, V[:, i])
        c.lands(shown_Z[i], on=Z[i])
    if not c.rounds_to(c.dot_value(a, V[:, c.col]), shown_Z[c.col]):  # dot() summed rounded products
        c.more_decimals()
    return lines + c.chain(f"{c.sym()}[{tok}] = {whole}", c.vec(shown_Z))


def concat(c: Cell) -> list:
    h, j = divmod(c.col, c.scn.d_v)  # columns and heads counted from 1 where they are shown
    return [c.say("ui.concat_cell", col=c.cols[c.col], j=person(j), head=person(h))
            + f"{c.colon()}Z_{numbering.shown(h)}[{c.rows[c.row]}, {numbering.shown(j)}] = {c.num(c.value)}"]


def projected(c: Cell) -> list:
    concat = c.walk.input(c.stage, 0)[1][c.row]  # (h·d_v,) every head's z side by side
    w = c.scn.param(c.stage.params[0])[:, c.col]
    tok, col = c.rows[c.row], c.cols[c.col]
    bias = c.scn.param(c.stage.params[1]) if len(c.stage.params) > 1 else None
    return [f"concat[{tok}] = {c.vec(concat)}", f"W_O[:, {col}] = {c.vec(w)}",
            *_biased(c, f"concat[{tok}] {c.mk.dot} W_O[:, {col}]", concat, w, bias)]


def stream_sum(c: Cell, names: tuple[str, str], note: str) -> list:
    """A residual sum's cell, H[i, j] = X[i, j] + O[i, j] (Y = H + F): both rows, then this cell from
    the digits printed, and `note` (a text key, given the token) on what the sum keeps. `names`:
    how the two inputs are written."""
    (_, A), (_, B) = (c.walk.input(c.stage, i) for i in (0, 1))
    a_name, b_name = names
    tok, col = c.rows[c.row], c.cols[c.col]
    a, b = c.printed(float(A[c.row, c.col])), c.printed(float(B[c.row, c.col]))
    end = c.printed(a + b)
    c.lands(end)
    return [f"{a_name}[{tok}] = {c.vec(A[c.row])}", f"{b_name}[{tok}] = {c.vec(B[c.row])}",
            f"{c.sym()}[{tok}, {col}] = {a_name}[{tok}, {col}] + {b_name}[{tok}, {col}] = {c.num(a)} + "
            f"{c.operand(b)} = {c.num(end)}", c.prose(c.say(note, token=tok))]
