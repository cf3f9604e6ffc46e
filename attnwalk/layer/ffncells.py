"""How a cell of the feed-forward network is worked out (features/ffn.py), every step from the
digits printed before it, as cells.py does:

    U[i, j] = h̃_i · W_1[:, j] + b_1[j]          F[i, j] = g_i · W_2[:, j] + b_2[j]
    G[i, j] = φ(U[i, j])                         (ReLU, GELU's tanh form, SiLU)
    G[i, j] = SiLU(h̃_i · W_gate[:, j]) × U[i, j]  (SwiGLU)
    Y[i, j] = H[i, j] + F[i, j]

and their gradients' cells on the backward walk (graph.Backward.cell).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attnwalk.layer import activations as act
from attnwalk.layer import cells
from attnwalk.layer.cells import dims_shown
from attnwalk.layer.gradcells import d, given, upstream
from attnwalk.layer.graph import symbol_of

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.graph import Stage


def product(c: Cell) -> list:
    """x_i · W[:, j] (+ b[j]) for U and F: x is the row the stage reads (H, LN₂(H), G)."""
    stage = c.stage
    x_key, X = c.walk.input(stage, 0)
    x_name, weight = symbol_of(x_key, c.scn), stage.params[0]
    W = np.asarray(c.scn.param(weight))
    x, w = X[c.row], W[:, c.col]
    tok, col = c.rows[c.row], c.cols[c.col]
    bias = float(c.scn.param(stage.params[1])[c.col]) if len(stage.params) > 1 else None
    lines = [f"{x_name}[{tok}] = {c.vec(x)}", f"{weight}[:, {col}] = {c.vec(w)}"]
    lines += c.dot(f"{x_name}[{tok}] {c.mk.dot} {weight}[:, {col}]", x, w, c.value - (bias or 0.0))
    if bias is not None:
        dot = c.product(c.dot_value(x, w))
        end = c.printed(float(dot) + c.printed(bias))
        c.lands(end)
        lines.append(f"{dot} + {stage.params[1]}[{col}] = {dot} + {c.operand(bias)} = {c.num(end)}")
    return lines + dims_shown(c, len(x))


def _phi_lines(c: Cell, kind: str, name: str, u: float) -> tuple[list, float]:
    """`name` = φ(u) worked from u as printed: the lines and the value they arrive at."""
    t, minus = c.mk.times, c.mk.minus
    u = c.printed(u)
    if kind == "relu":
        end = max(u, 0.0)
        return [f"{name} = max({c.num(u)}, 0) = {c.num(end)}"], end
    if kind == "silu":
        s = c.printed(float(act.sigmoid(np.float64(u))))
        end = c.printed(u * s)
        return [f"σ({c.num(u)}) = 1 / (1 + e^({minus}{c.operand(u)})) = {c.num(s)}",
                f"{name} = {c.num(u)} {t} σ({c.num(u)}) = {c.num(u)} {t} {c.num(s)} = {c.num(end)}"], end
    inner = c.printed(act.GELU_C * (u + act.GELU_K * u ** 3))
    th = c.printed(float(np.tanh(inner)))
    end = c.printed(0.5 * u * (1.0 + th))
    return [c.plain(f"a = √(2/π) {t} ({c.num(u)} + 0.044715 {t} {c.operand(u)}³) = {c.num(inner)}"),
            f"tanh(a) = tanh({c.num(inner)}) = {c.num(th)}",
            c.plain(f"{name} = ½ {t} {c.num(u)} {t} (1 + {c.operand(th)}) = {c.num(end)}")], end


def activation(kind: str):
    """G[i, j] = φ(U[i, j]): the cell of activation `kind` (relu, gelu, silu)."""
    def worked(c: Cell) -> list:
        tok, col = c.rows[c.row], c.cols[c.col]
        u_key, U = c.walk.input(c.stage, 0)
        u_name = symbol_of(u_key, c.scn)
        fn = act.ACTIVATIONS[kind].name
        lines, end = _phi_lines(c, kind, f"{c.sym()}[{tok}, {col}] = {fn}({u_name}[{tok}, {col}])",
                                float(U[c.row, c.col]))
        c.lands(end)
        return lines + [c.prose(c.say(f"ffn.{kind}_cell"))]
    return worked


def gated(c: Cell) -> list:
    """SwiGLU: the gate's pre-activation a = h̃_i · W_gate[:, j], SiLU(a), times U[i, j]."""
    tok, col = c.rows[c.row], c.cols[c.col]
    (x_key, X), (u_key, U) = (c.walk.input(c.stage, i) for i in (0, 1))
    x_name, u_name = symbol_of(x_key, c.scn), symbol_of(u_key, c.scn)
    w = np.asarray(c.scn.param(c.stage.params[0]))[:, c.col]
    x = X[c.row]
    lines = [f"{x_name}[{tok}] = {c.vec(x)}", f"W_gate[:, {col}] = {c.vec(w)}",
             *c.dot(f"a = {x_name}[{tok}] {c.mk.dot} W_gate[:, {col}]", x, w, float(x @ w))]
    a = c.printed(c.dot_value(x, w))
    silu_lines, s = _phi_lines(c, "silu", "SiLU(a)", a)
    u = c.printed(float(U[c.row, c.col]))
    end = c.printed(c.printed(s) * u)
    c.lands(end)
    return lines + silu_lines + [
        f"{c.sym()}[{tok}, {col}] = SiLU(a) {c.mk.times} {u_name}[{tok}, {col}] = {c.num(s)} {c.mk.times} "
        f"{c.operand(u)} = {c.num(end)}", c.prose(c.say("ffn.swiglu_cell"))]


def stream_sum(c: Cell) -> list:
    """Y[i, j] = H[i, j] + F[i, j]: the FFN's output added back to the stream it read."""
    names = tuple(symbol_of(name, c.scn) for name in c.stage.reads)
    return cells.stream_sum(c, names, "ffn.sum_cell")


# -- the backward walk ------------------------------------------------------------------------------


def activation_grad(kind: str):
    """∂L/∂U[i, j] = ∂L/∂G[i, j] × φ′(U[i, j]), cell by cell."""
    def worked(c: Cell, stage: Stage, index: int) -> tuple[list, float]:
        g = c.printed(float(upstream(c, stage)[c.row, c.col]))
        u_name, U = given(c, stage, 0)
        fn = act.ACTIVATIONS[kind]
        u = float(U[c.row, c.col])
        slope = c.printed(float(fn.slope(np.float64(u))))
        value = c.printed(g * slope)
        c.lands(value)
        tok, col = c.rows[c.row], c.cols[c.col]
        return [f"{fn.name}'({u_name}[{tok}, {col}]) = {fn.name}'({c.num(u)}) = {c.num(slope)}",
                f"{c.ref()} = {d(stage.symbol)}[{tok}, {col}] {c.mk.times} {c.num(slope)} = {c.num(g)} "
                f"{c.mk.times} {c.num(slope)} = {c.num(value)}"], value
    return worked


def gate_delta(X: np.ndarray, U: np.ndarray, W: np.ndarray, dG: np.ndarray) -> np.ndarray:
    """∂L/∂a for SwiGLU's gate pre-activation a = X · W_gate: ∂L/∂G ⊙ U ⊙ SiLU′(a)."""
    return dG * U * act.silu_slope(X @ W)  # (n, d_ff)


def gated_grad(c: Cell, stage: Stage, index: int) -> tuple[list, float]:
    """SwiGLU's inputs: ∂L/∂U = ∂L/∂G ⊙ SiLU(a); ∂L/∂h̃ = δ · W_gateᵀ and ∂L/∂W_gate = h̃ᵀ · δ with
    δ = ∂L/∂G ⊙ U ⊙ SiLU′(a) (the U part of ∂L/∂h̃ is U's own, added on its screen)."""
    dG = upstream(c, stage)
    x_name, X = given(c, stage, 0)
    _, U = given(c, stage, 1)
    W = np.asarray(c.scn.param(stage.params[0]), dtype=np.float64)
    tok, col = c.rows[c.row], c.cols[c.col]
    if index == 1:
        a = float(X[c.row] @ W[:, c.col])
        s = c.printed(float(act.silu(np.float64(a))))
        g = c.printed(float(dG[c.row, c.col]))
        value = c.printed(g * s)
        c.lands(value)
        return [f"SiLU(a) = SiLU({c.num(a)}) = {c.num(s)}",
                f"{c.ref()} = {d(stage.symbol)}[{tok}, {col}] {c.mk.times} SiLU(a) = {c.num(g)} {c.mk.times} "
                f"{c.num(s)} = {c.num(value)}"], value
    delta = gate_delta(X, U, W, dG)  # (n, d_ff)
    if index == 0:  # row i of h̃, dimension k: δ_i · W_gate[k, :]
        value = float(delta[c.row] @ W[c.col])
        return [f"δ[{tok}] = ({d(stage.symbol)} ⊙ U ⊙ SiLU'(a))[{tok}] = {c.vec(delta[c.row])}",
                *c.dot(f"δ[{tok}] {c.mk.dot} W_gate[{col}, :]", delta[c.row], W[c.col], value)], value
    value = float(X[:, c.row] @ delta[:, c.col])  # W_gate[k, j]: every token's h̃[:, k] · δ[:, j]
    return [f"δ[:, {col}] = ({d(stage.symbol)} ⊙ U ⊙ SiLU'(a))[:, {col}] = {c.vec(delta[:, c.col])}",
            *c.dot(f"{x_name}[:, {c.rows[c.row]}] {c.mk.dot} δ[:, {col}]", X[:, c.row], delta[:, c.col], value)], value
