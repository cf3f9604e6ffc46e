"""How a norm's cell is worked out, line by line, for a real model's norms (features/model/cells.py)
and a scenario's `norm:` (features/norm.py) alike: every step from the digits printed before it,
dimensions named as the tables label them (from 1).

    μ = Σ x / d,  σ = √(mean((x − μ)²) + ε),  (x_j − μ) / σ · γ_j + β_j      LayerNorm
    RMS = √(mean(x²) + ε),  x_j / RMS · γ_j                                  RMSNorm
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from attnwalk.layer.graph import Backward

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.graph import Context
    from attnwalk.layer.modes import Mode
    from attnwalk.scenario.scenario import Scenario


def mean_lines(c: Cell, name: str, x: np.ndarray, mu: float) -> tuple[list, float]:
    """μ = (x_1 + … + x_d) / d, from the sum of the entries as printed; and μ as printed."""
    d = len(x)
    total = float(sum(c.printed(v) for v in x))  # every entry as printed, the hidden ones too
    mean = c.printed(c.printed(total) / d)
    c.lands(mean, on=mu)
    shown = [i for i in c.elided(d) if isinstance(i, int)]  # only these are printed
    parts = c.terms({i: c.num(x[i]) if i == 0 else c.operand(x[i]) for i in shown}, d)
    return [f"Σ {name} = {parts} = {c.num(total)}", f"μ = {c.num(total)} / {d} = {c.num(mean)}"], mean


def sigma_lines(c: Cell, name: str, x: np.ndarray, mu: float, sigma: float, eps: float) -> tuple[list, float]:
    """σ = √(mean((x − μ)²) + ε); and σ as printed, which the lines after it divide by."""
    var = float(np.mean((x - mu) ** 2))
    root = c.printed(np.sqrt(c.printed(var) + eps))
    c.lands(root, on=sigma)
    t = c.mk.sqrt
    return [f"var = mean(({name} {c.mk.minus} μ)²) = {c.num(var)}",
            c.plain(f"σ = {t}(var + ε) = {t}({c.num(var)} + {eps:g}) = {c.num(root)}")], root


def normalized_lines(c: Cell, name: str, x: float, mu: float, sigma: float, gamma: float,
                     beta: float, which: str = "") -> list:
    """(x − μ) / σ · γ + β for the cell's dimension, each step from the digits printed before it;
    `which` tells a second LayerNorm's γ₂, β₂ from the first's."""
    minus, t, dim = c.mk.minus, c.mk.times, c.cols[c.col]
    centred = c.printed(c.printed(x) - c.printed(mu))
    scaled = c.printed(centred / c.printed(sigma))
    stretched = c.printed(scaled * c.printed(gamma))
    end = c.printed(stretched + c.printed(beta))
    c.lands(end)
    return [c.plain(f"γ{which}[{dim}] = {c.num(gamma)}, β{which}[{dim}] = {c.num(beta)}"),
            *c.chain(f"{name} = ({c.num(x)} {minus} {c.operand(mu)}) / {c.num(sigma)} {t} "
                     f"{c.operand(gamma)} + {c.operand(beta)}",
                     f"{c.num(centred)} / {c.num(sigma)} {t} {c.operand(gamma)} + {c.operand(beta)}",
                     f"{c.num(scaled)} {t} {c.operand(gamma)} + {c.operand(beta)}",
                     f"{c.num(stretched)} + {c.operand(beta)}", c.num(end))]


def rms_lines(c: Cell, name: str, x: np.ndarray, rms: float, eps: float) -> list:
    """RMS = √(mean(x²) + ε): the squares' mean, then the root; no mean is subtracted.
    `name` is the row as the cell names it, "E_sum[bank]"."""
    squares = float(np.mean(x ** 2))
    root = c.printed(np.sqrt(c.printed(squares) + eps))
    c.lands(root, on=rms)
    shown = [i for i in c.elided(len(x)) if isinstance(i, int)]
    parts = c.terms({i: f"{c.operand(x[i])}²" for i in shown}, len(x))
    t = c.mk.sqrt
    return [f"mean({name}²) = ({parts}) / {len(x)} = {c.num(squares)}",
            c.plain(f"RMS = {t}(mean({name}²) + ε) = {t}({c.num(squares)} + {eps:g}) = {c.num(root)}")]


def rms_normalized_lines(c: Cell, lhs: str, x: float, rms: float, gamma: float, which: str = "") -> list:
    """`lhs` = x / RMS · γ for the cell's dimension ("X[tok, 2] = E_sum[tok, 2] / RMS × γ[2]"),
    each step from the digits printed before it; `which` tells a second norm's γ₂ from the first's."""
    t, dim = c.mk.times, c.cols[c.col]
    scaled = c.printed(c.printed(x) / c.printed(rms))
    end = c.printed(scaled * c.printed(gamma))
    c.lands(end)
    return [f"RMS = {c.num(rms)}, γ{which}[{dim}] = {c.num(gamma)}",
            *c.chain(lhs, f"{c.num(x)} / {c.num(rms)} {t} {c.operand(gamma)}",
                     f"{c.num(scaled)} {t} {c.operand(gamma)}", c.num(end))]


# -- the backward walk: one cell of ∂L/∂x, ∂L/∂γ, ∂L/∂β through a norm (norms.*_grad) ---------------


def grad_lines(c: Cell, stage, index: int, rms: bool, eps: float) -> tuple[list, float]:
    """Input `index` of norm stage `stage` (0: its x, 1: γ, 2: β), one cell of its gradient, each
    step from the digits printed before it; and the value it arrives at.

        ∂L/∂x[i, j] = (G_j − mean(G) − x̂_j · mean(G ⊙ x̂)) / σ,   G = ∂L/∂y[i] ⊙ γ   LayerNorm
        ∂L/∂x[i, j] = (G_j − x̂_j · mean(G ⊙ x̂)) / RMS                              RMSNorm
        ∂L/∂γ[j] = Σ_i ∂L/∂y[i, j] · x̂[i, j],   ∂L/∂β[j] = Σ_i ∂L/∂y[i, j]
    """
    from attnwalk.layer import gradcells, norms

    dy = gradcells.upstream(c, stage)  # (n, d) ∂L/∂ of the norm's output
    x_name, X = gradcells.given(c, stage, 0)
    gamma = np.asarray(c.scn.param(stage.params[0]), dtype=np.float64)
    root = norms.rms(X, eps) if rms else norms.stats(X, eps)[:, 1:]  # (n, 1): RMS or σ
    hat = X / root if rms else (X - X.mean(axis=1, keepdims=True)) / root  # (n, d) x̂
    grads = (norms.rms_normalized_grad if rms else norms.normalized_grad)(dy, X, gamma, eps)
    dy_name, h = gradcells.d(stage.symbol), c.hat
    col = c.cols[c.col]
    if index > 0:  # γ or β: a sum over the tokens, down column j
        value = float(grads[index][c.col])
        if index == 2:
            return c.dot(f"Σ_i {dy_name}[i, {col}]", dy[:, c.col], np.ones(len(dy)), value), value
        return c.dot(f"Σ_i {dy_name}[i, {col}] {c.mk.times} x{h}[i, {col}]", dy[:, c.col], hat[:, c.col],
                     value), value
    value = float(grads[0][c.row, c.col])
    i, tok, d = c.row, c.rows[c.row], X.shape[1]
    G = np.array([c.printed(c.printed(a) * c.printed(b)) for a, b in zip(dy[i], gamma)])  # as printed
    below = c.printed(float(root[i, 0]))
    lines: list = [f"G = {dy_name}[{tok}] ⊙ γ = {c.vec(G)}",
                   f"x{h} = {x_name}[{tok}] / RMS = {c.vec(hat[i])},  RMS = {c.num(below)}" if rms else
                   f"x{h} = ({x_name}[{tok}] {c.mk.minus} μ) / σ = {c.vec(hat[i])},  σ = {c.num(below)}"]
    g, xh = c.printed(G[c.col]), c.printed(float(hat[i, c.col]))
    parts = f"{c.num(g)}"
    top = g
    if not rms:  # LayerNorm also gives up the row's mean
        mean = c.printed(c.printed(float(sum(G))) / d)
        lines.append(f"mean(G) = {c.num(float(sum(G)))} / {d} = {c.num(mean)}")
        parts += f" {c.mk.minus} {c.operand(mean)}"
        top = c.printed(g - mean)
    inner = c.dot_value(G, hat[i])
    lines += c.dot(f"G {c.mk.dot} x{h}", G, hat[i], float(G @ hat[i]))
    along = c.printed(c.printed(inner) / d)
    lines.append(f"mean(G ⊙ x{h}) = {c.product(inner)} / {d} = {c.num(along)}")
    parts += f" {c.mk.minus} {c.operand(xh)} {c.mk.times} {c.operand(along)}"
    top = c.printed(top - c.printed(xh * along))
    end = c.printed(top / below)
    c.lands(end, on=value)
    lines += c.chain(f"{c.ref()} = ({parts}) / {'RMS' if rms else 'σ'}", f"{c.num(top)} / {c.num(below)}",
                     c.num(end))
    return [c.plain(line) if isinstance(line, str) else line for line in lines], value


def backward(rule: Callable[[Scenario], tuple[str, float]], symbols: dict[str, str]) -> Backward:
    """A norm's backward (graph.Backward), for every norm a layer has (before the projections, the
    FFN's, the final one): `rule(scn)` says which norm it is, ("layer" | "rms", ε); `symbols`
    writes its γ and β (γ, γ₂, γ_f). ∂L/∂x through the norm (G = ∂L/∂y ⊙ γ, x̂ the row normalised
    before γ), ∂L/∂γ and ∂L/∂β, row by row (layer/norms.py)."""
    from attnwalk.layer import norms

    gamma = next(iter(symbols.values()))

    def grad(ctx: Context, d: np.ndarray, out: np.ndarray, X: np.ndarray, g: np.ndarray,
             beta: np.ndarray | None = None) -> tuple:
        kind, eps = rule(ctx.scn)
        if kind == "rms":
            return norms.rms_normalized_grad(d, X, g, eps)
        return norms.normalized_grad(d, X, g, eps)

    def terms(scn: Scenario, mode: Mode) -> tuple[str, ...]:
        if rule(scn)[0] == "rms":
            return f"(G − x̂ ⊙ mean(G ⊙ x̂)) / RMS,  G = {{d}} ⊙ {gamma}", "Σ_i {d} ⊙ x̂"
        return f"(G − mean(G) − x̂ ⊙ mean(G ⊙ x̂)) / σ,  G = {{d}} ⊙ {gamma}", "Σ_i {d} ⊙ x̂", "Σ_i {d}"

    def cell(c: Cell, stage, index: int) -> tuple[list, float]:
        kind, eps = rule(c.scn)
        return grad_lines(c, stage, index, kind == "rms", eps)

    return Backward(grad, terms, cell, symbols)
