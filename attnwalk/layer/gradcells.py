"""What each base stage passes back, worked out for one cell (graph.Backward.cell): P = L · R's
products, QKᵀ's query and key (through the transpose), S's division, the softmax's Jacobian, concat's
blocks, a sum's summands. RoPE's and the score kinds' are in their feature modules. Each returns
its lines and the value they arrive at; every equation holds for the digits it prints, as in
cells.py. The gradient screen that shows them is assembled in gradscreens.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attnwalk.layer.graph import Stage, symbol_of
from attnwalk.numbering import shown

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell


def d(symbol: str) -> str:
    """∂L/∂Z, ∂L/∂(QKᵀ): the gradient of the matrix printed as `symbol`."""
    return f"∂L/∂({symbol})" if ("ᵀ" in symbol or " " in symbol) else f"∂L/∂{symbol}"


# -- what each base stage passes back (graph.Backward.cell): (lines, value) ------------------------


def upstream(c: Cell, stage: Stage) -> np.ndarray:
    """∂L/∂ of `stage`'s output, the gradient it passes back (this head's for a per-head stage)."""
    grads = c.walk.grads
    return grads.heads[c.head][stage.key] if stage.per_head else grads.mats[stage.key]


def given(c: Cell, stage: Stage, index: int) -> tuple[str, np.ndarray]:
    """(symbol, forward matrix) of `stage`'s index-th input, this head's for a per-head stage."""
    name, M = c.walk.forward.input(stage, index, c.head)
    return symbol_of(name, c.scn), np.asarray(M, dtype=np.float64)


def passed(c: Cell, stage: Stage, index: int) -> tuple[list, float]:
    """X = E + P (S + B): a summand's gradient is the sum's, unchanged."""
    g = float(upstream(c, stage)[c.row, c.col])
    return [f"{c.ref()} = {d(stage.symbol)}[{c.rows[c.row]}, {c.cols[c.col]}] = {c.num(g)}",
            c.prose(c.say("grad.cell.passed", stage=stage.symbol))], g


def product(c: Cell, stage: Stage, index: int) -> tuple[list, float]:
    """P = L · R (Q = X · W, Z = A · V, O = concat · W_O): ∂L/∂L[i, j] = ∂L/∂P[i, :] · R[j, :], and
    ∂L/∂R[j, k] = L[:, j] · ∂L/∂P[:, k], a sum over the rows of P (every token, or every query);
    a bias added to every row gets the column sums of ∂L/∂P."""
    g = upstream(c, stage)  # (rows, cols) ∂L/∂P
    dp = d(stage.symbol)
    if index == 0:
        r_name, R = given(c, stage, 1)
        value = float(g[c.row] @ R[c.col])
        return c.dot(f"{dp}[{c.rows[c.row]}] {c.mk.dot} {r_name}[{c.cols[c.col]}, :]", g[c.row], R[c.col],
                     value), value
    l_name, L = given(c, stage, 0)
    if index == 1:  # R[j, k]: j is this row (a dimension of X, or a key)
        value = float(L[:, c.row] @ g[:, c.col])
        lines = c.dot(f"{l_name}[:, {c.rows[c.row]}] {c.mk.dot} {dp}[:, {c.cols[c.col]}]", L[:, c.row],
                      g[:, c.col], value)
        if stage.keys:  # Z = A · V: a value reaches every query through its column of A
            lines.insert(0, c.prose(c.say("grad.cell.values", name=c.rows[c.row])))
        return lines, value
    value = float(g[:, c.col].sum())
    return c.dot(f"Σ_i {dp}[i, {c.cols[c.col]}]", g[:, c.col], np.ones(len(g)), value), value


def dot_scores(c: Cell, stage: Stage, index: int) -> tuple[list, float]:
    """QKᵀ: ∂L/∂q_i = Σ_j ∂L/∂(QKᵀ)[i, j] k_j; ∂L/∂k_j = Σ_i ∂L/∂(QKᵀ)[i, j] q_i, through the
    transpose: key j's column, every query that scored it."""
    g = upstream(c, stage)  # (n, m)
    dqk = d(stage.symbol)
    if index == 0:
        k_name, K = given(c, stage, 1)
        value = float(g[c.row] @ K[:, c.col])
        return c.dot(f"{dqk}[{c.rows[c.row]}, :] {c.mk.dot} {k_name}[:, {c.cols[c.col]}]", g[c.row],
                     K[:, c.col], value), value
    q_name, Q = given(c, stage, 0)
    value = float(g[:, c.row] @ Q[:, c.col])
    return [c.prose(c.say("grad.cell.transpose", name=c.rows[c.row])),
            *c.dot(f"{dqk}[:, {c.rows[c.row]}] {c.mk.dot} {q_name}[:, {c.cols[c.col]}]", g[:, c.row],
                   Q[:, c.col], value)], value


def scaled(c: Cell, stage: Stage, index: int) -> tuple[list, float]:
    """S = QKᵀ / √d_k: ∂L/∂(QKᵀ) = ∂L/∂S / √d_k (unscaled: the same)."""
    g = c.printed(float(upstream(c, stage)[c.row, c.col]))
    scale = c.walk.forward.scale
    ref = f"{d(stage.symbol)}[{c.rows[c.row]}, {c.cols[c.col]}]"
    if scale == 1.0:
        return [f"{ref} = {c.num(g)}", c.prose(c.say("grad.cell.unscaled"))], g
    value = c.printed(g / c.printed(scale))
    c.lands(value)
    return [f"{ref} / {c.mk.sqrt}d_k = {c.num(g)} / {c.num(scale)} = {c.num(value)}"], value


def softmax(c: Cell, stage: Stage, index: int) -> tuple[list, float]:
    """A = softmax(S + M): ∂L/∂S[i, j] = A[i, j] · (∂L/∂A[i, j] − Σ_k A[i, k] ∂L/∂A[i, k])."""
    if not c.walk.mode.smooth:
        return [c.prose(c.say(f"grad.cell.{c.walk.mode.name}"))], 0.0
    A = c.walk.forward.matrix("A", c.head)
    g = upstream(c, stage)
    tok, key = c.rows[c.row], c.cols[c.col]
    if not c.scn.allowed[c.row, c.col]:
        return [c.prose(c.say("grad.cell.masked", query=tok, name=key))], 0.0
    dA = d("A")
    # rowsum(A ⊙ ∂L/∂A) of this row: the row of A dotted with the row of ∂L/∂A
    lines = c.dot(f"A[{tok}] {c.mk.dot} {dA}[{tok}]", A[c.row], g[c.row], float(A[c.row] @ g[c.row]))
    mean = c.printed(c.dot_value(A[c.row], g[c.row]))
    a, ga = c.printed(float(A[c.row, c.col])), c.printed(float(g[c.row, c.col]))
    inner = c.printed(ga - mean)
    value = c.printed(a * inner * c.walk.amplify)
    lines.append(f"A[{tok}, {key}] {c.mk.times} ({dA}[{tok}, {key}] {c.mk.minus} {c.operand(mean)}) = "
                 f"{c.num(a)} {c.mk.times} ({c.num(ga)} {c.mk.minus} {c.operand(mean)}) = "
                 f"{c.num(a)} {c.mk.times} {c.operand(inner)} = {c.num(value)}")
    if a * (1 - a) < 1e-3:  # saturated: a ≈ 0 or 1, and the gradient with it
        lines.append(c.prose(c.say("grad.cell.saturated", weight=c.num(a))))
    return lines, value


def concat(c: Cell, stage: Stage, index: int) -> tuple[list, float]:
    """concat = [Z_1 | … | Z_h]: head h's Z gets its own columns of ∂L/∂concat back."""
    width = c.scn.d_v
    col = c.head * width + c.col
    value = float(upstream(c, stage)[c.row, col])
    return [f"{c.ref()} = {d(stage.symbol)}[{c.rows[c.row]}, {shown(col)}] = {c.num(value)}"], value
