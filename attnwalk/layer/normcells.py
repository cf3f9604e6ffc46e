"""How a norm's cell is worked out, line by line, for a real model's norms (features/model/cells.py)
and a scenario's `norm:` (features/norm.py) alike: every step from the digits printed before it,
dimensions named as the tables label them (from 1).

    μ = Σ x / d,  σ = √(mean((x − μ)²) + ε),  (x_j − μ) / σ · γ_j + β_j      LayerNorm
    RMS = √(mean(x²) + ε),  x_j / RMS · γ_j                                  RMSNorm
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell


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


def rms_normalized_lines(c: Cell, lhs: str, x: float, rms: float, gamma: float) -> list:
    """`lhs` = x / RMS · γ for the cell's dimension ("X[tok, 2] = E_sum[tok, 2] / RMS × γ[2]"),
    each step from the digits printed before it."""
    t, dim = c.mk.times, c.cols[c.col]
    scaled = c.printed(c.printed(x) / c.printed(rms))
    end = c.printed(scaled * c.printed(gamma))
    c.lands(end)
    return [f"RMS = {c.num(rms)}, γ[{dim}] = {c.num(gamma)}",
            *c.chain(lhs, f"{c.num(x)} / {c.num(rms)} {t} {c.operand(gamma)}",
                     f"{c.num(scaled)} {t} {c.operand(gamma)}", c.num(end))]
