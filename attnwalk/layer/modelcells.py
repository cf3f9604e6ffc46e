"""How one cell of a real model's own stages is worked out (realmodel.py's stages), written against
the same Cell as cells.py: every equation holds for the digits it prints.

A model's rows are d_model = 384 (or 768) wide, so a vector is printed with its middle elided;
`dims_shown` says which dimensions a printed vector holds.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from attnwalk.layer import realmodel

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell


def _plain(recipe: Callable[[Cell], list]) -> Callable[[Cell], list]:
    """A recipe whose lines of math (μ, σ, γ, β, Σ, √, ²) are spelled in ASCII under --ascii."""
    @functools.wraps(recipe)
    def worked(c: Cell) -> list:
        return [c.plain(line) if isinstance(line, str) else line for line in recipe(c)]
    return worked


def dims_shown(c: Cell, count: int) -> list:
    """"x has 384 dimensions; the vectors show 1–3 and 382–384", where a vector is elided."""
    shown = [i for i in c.elided(count) if isinstance(i, int)]
    if len(shown) == count:
        return []
    runs: list[list[int]] = []
    for i in shown:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    dash = "-" if c.mk.minus == "-" else "–"
    # as the tables label dimensions, from 1
    parts = ", ".join(f"{run[0] + 1}{dash}{run[-1] + 1}" if len(run) > 1 else str(run[0] + 1) for run in runs)
    return [c.prose(c.say("model.dims_shown", count=count, shown=parts))]


@_plain
def segment(c: Cell) -> list:
    tok = c.rows[c.row]
    row = c.walk.mats["E_seg"][c.row]
    key = "model.segment_cell_one_type" if realmodel.fairseq_positions(c.scn) else "model.segment_cell"
    return [c.prose(c.say(key)), f"E_seg[{tok}] = W_seg[0] = {c.vec(row)}",
            *dims_shown(c, len(row))]


@_plain
def embedding_sum(c: Cell) -> list:
    tok, r, j = c.rows[c.row], c.row, c.col
    if realmodel.rms(c.scn):  # the Llama family: no position table, E_sum is E itself
        row = c.walk.mats["E"][r]
        return [f"E_sum[{tok}] = E[{tok}] = {c.vec(row)}",
                f"E_sum[{tok}, {c.cols[j]}] = E[{tok}, {c.cols[j]}] = {c.num(row[j])}"]
    keys = ["E", "P"] + (["E_seg"] if "E_seg" in c.walk.mats else [])
    parts = [c.walk.mats[k][r] for k in keys]
    total = c.walk.mats["E_sum"][r]
    names = " + ".join(f"{k}[{tok}]" for k in keys)
    # the element worked: each term as printed, summed as a learner adds them
    added = c.printed(sum(c.printed(p[j]) for p in parts))
    c.lands(added)
    terms = " + ".join(c.num(p[j]) if i == 0 else c.operand(p[j]) for i, p in enumerate(parts))
    element = " + ".join(f"{k}[{tok}, {c.cols[j]}]" for k in keys)  # columns from 1, as the table
    return [*c.chain(f"E_sum[{tok}] = {names}", " + ".join(c.vec(p) for p in parts), c.vec(total)),
            *dims_shown(c, len(total)),
            f"{element} = {terms} = {c.num(added)}"]


@_plain
def earlier(c: Cell) -> list:
    layer = c.scn.model.layer
    said = "model.llama.earlier_cell" if realmodel.rms(c.scn) else "model.earlier_cell"  # RMSNorm, SwiGLU
    return [c.prose(c.say(said, layers=layer, layer=layer + 1)),
            f"H[{c.rows[c.row]}] = {c.vec(c.walk.mats['H'][c.row])}",
            *dims_shown(c, c.scn.d_model)]


def _mean_lines(c: Cell, name: str, x: np.ndarray, mu: float) -> tuple[list, float]:
    """μ = (x_0 + … + x_{d−1}) / d, from the sum of the entries as printed; and μ as printed."""
    d = len(x)
    total = float(sum(c.printed(v) for v in x))  # every entry as printed, the hidden ones too
    mean = c.printed(c.printed(total) / d)
    c.lands(mean, on=mu)
    shown = [i for i in c.elided(d) if isinstance(i, int)]  # only these are printed
    parts = c.terms({i: c.num(x[i]) if i == 0 else c.operand(x[i]) for i in shown}, d)
    return [f"Σ {name} = {parts} = {c.num(total)}", f"μ = {c.num(total)} / {d} = {c.num(mean)}"], mean


def _sigma_lines(c: Cell, name: str, x: np.ndarray, mu: float, sigma: float, eps: float) -> tuple[list, float]:
    """σ = √(mean((x − μ)²) + ε); and σ as printed, which the lines after it divide by."""
    var = float(np.mean((x - mu) ** 2))
    root = c.printed(np.sqrt(c.printed(var) + eps))
    c.lands(root, on=sigma)
    t = c.mk.sqrt
    return [f"var = mean(({name} {c.mk.minus} μ)²) = {c.num(var)}",
            c.plain(f"σ = {t}(var + ε) = {t}({c.num(var)} + {eps:g}) = {c.num(root)}")], root


@_plain
def norm_stats(c: Cell) -> list:
    key = realmodel.norm_input(c.scn)
    x = c.walk.mats[key][c.row]  # (d_model,)
    mu, sigma = c.walk.mats["LN_stats"][c.row]
    name = f"{key}[{c.rows[c.row]}]"
    lines = [f"{name} = {c.vec(x)}", *dims_shown(c, len(x))]
    if c.col == 0:
        return lines + _mean_lines(c, name, x, mu)[0]
    return lines + [f"μ = {c.num(mu)}"] + _sigma_lines(c, name, x, mu, sigma,
                                                       realmodel.norm_before(c.scn).eps)[0]


def _normalized_cell(c: Cell, name: str, x: float, mu: float, sigma: float,
                     params: realmodel.LayerNormParams, which: str = "") -> list:
    """(x − μ) / σ · γ + β for one element, each step from the digits printed before it; `which`
    tells a second LayerNorm's γ₂, β₂ from the first's."""
    j, minus, t = c.col, c.mk.minus, c.mk.times
    g, b = params.gamma[j], params.beta[j]
    centred = c.printed(c.printed(x) - c.printed(mu))
    scaled = c.printed(centred / c.printed(sigma))
    stretched = c.printed(scaled * c.printed(g))
    end = c.printed(stretched + c.printed(b))
    c.lands(end)
    dim = c.cols[j]  # as the table labels the column, from 1
    return [c.plain(f"γ{which}[{dim}] = {c.num(g)}, β{which}[{dim}] = {c.num(b)}"),
            *c.chain(f"{name} = ({c.num(x)} {minus} {c.operand(mu)}) / {c.num(sigma)} {t} "
                     f"{c.operand(g)} + {c.operand(b)}",
                     f"{c.num(centred)} / {c.num(sigma)} {t} {c.operand(g)} + {c.operand(b)}",
                     f"{c.num(scaled)} {t} {c.operand(g)} + {c.operand(b)}",
                     f"{c.num(stretched)} + {c.operand(b)}", c.num(end))]


@_plain
def layer_norm(c: Cell) -> list:
    key = realmodel.norm_input(c.scn)
    tok = c.rows[c.row]
    x = c.walk.mats[key][c.row, c.col]
    mu, sigma = c.walk.mats["LN_stats"][c.row]
    return [c.prose(c.say("model.ln_cell", x=key, token=tok)),
            f"μ = {c.num(mu)}, σ = {c.num(sigma)}",
            *_normalized_cell(c, f"({key}[{tok}, {c.cols[c.col]}] {c.mk.minus} μ) / σ {c.mk.times} "
                              f"γ[{c.cols[c.col]}] + β[{c.cols[c.col]}]", x, mu, sigma,
                              realmodel.norm_before(c.scn))]


@_plain
def residual(c: Cell) -> list:
    key = realmodel.residual_input(c.scn)
    tok, j = c.rows[c.row], c.col
    a, o = c.walk.mats[key][c.row, j], c.walk.mats["O"][c.row, j]
    added = c.printed(c.printed(a) + c.printed(o))
    c.lands(added)
    family = c.scn.model.info.family
    said = "model.llama.residual_cell" if family == "llama" else f"model.residual_cell_{family}"
    return [c.prose(c.say(said, x=key)),
            f"R[{tok}, {c.cols[j]}] = {key}[{tok}, {c.cols[j]}] + O[{tok}, {c.cols[j]}] = {c.num(a)} + {c.operand(o)} "
            f"= {c.num(added)}"]


@_plain
def after_norm(c: Cell) -> list:
    params = realmodel.norm_after(c.scn)
    R = c.walk.mats["R"][c.row]  # (d_model,)
    mu, sigma = realmodel.stats(R[None, :], params.eps)[0]
    tok = c.rows[c.row]
    name = f"R[{tok}]"
    mean_lines, mu_shown = _mean_lines(c, name, R, mu)
    sigma_lines, sigma_shown = _sigma_lines(c, name, R, mu, sigma, params.eps)
    # Y's own line divides by the μ and σ just printed, not by their unrounded values: one σ a cell
    return [f"{name} = {c.vec(R)}", *dims_shown(c, len(R)), *mean_lines, *sigma_lines,
            *_normalized_cell(c, f"Y[{tok}, {c.cols[c.col]}]", R[c.col], mu_shown, sigma_shown, params, "₂")]


@_plain
def glance(c: Cell) -> list:
    """A head's entropy in one query row: H = −Σ a log₂ a over the keys it gives weight to."""
    from attnwalk.layer.walk import Layer

    layer = Layer(c.scn, c.walk.mode, c.walk.amplify, c.walk.source)
    a = realmodel.head_weights(c.walk.mats, layer, c.col)[c.row]  # (m,)
    tok = c.rows[c.row]
    kept = [j for j in range(len(a)) if a[j] > 0]
    # a weight that prints as 0 adds 0 (0 · log 0 = 0, as entropy takes it), not NaN
    terms = np.array([-p * np.log2(p) if p > 0 else 0.0 for p in (c.printed(a[j]) for j in kept)])
    total = c.printed(float(terms.sum()))
    c.lands(total)
    printed = [i for i in c.elided(len(kept)) if isinstance(i, int)]
    shown = c.terms({i: f"{c.num(a[kept[i]])}·log₂{c.num(a[kept[i]])}" for i in printed}, len(kept))
    return [c.prose(c.say("model.glance_cell", head=c.col + 1, token=tok)),
            f"A_{c.col + 1}[{tok}] = {c.vec(a)}",
            c.plain(f"entropy = {c.mk.minus}({shown}) = {c.num(total)} ") + c.say("model.bits")]


@_plain
def rms_stats(c: Cell) -> list:
    """RMS = √(mean(x²) + ε) for one row: the squares' mean, then the root; no mean is subtracted."""
    key = realmodel.norm_input(c.scn)
    tok = c.rows[c.row]
    x = c.walk.mats[key][c.row]  # (d_model,)
    eps = realmodel.norm_before(c.scn).eps
    name = f"{key}[{tok}]"
    squares = float(np.mean(x ** 2))
    root = c.printed(np.sqrt(c.printed(squares) + eps))
    c.lands(root, on=float(c.walk.mats["RMS"][c.row, 0]))
    shown = [i for i in c.elided(len(x)) if isinstance(i, int)]
    parts = c.terms({i: f"{c.operand(x[i])}²" for i in shown}, len(x))
    t = c.mk.sqrt
    return [c.prose(c.say("model.llama.rms_cell", x=key, token=tok)), f"{name} = {c.vec(x)}",
            *dims_shown(c, len(x)),
            f"mean({name}²) = ({parts}) / {len(x)} = {c.num(squares)}",
            f"RMS = {t}(mean({name}²) + ε) = {t}({c.num(squares)} + {eps:g}) = {c.num(root)}"]


@_plain
def rms_norm(c: Cell) -> list:
    """X[i, j] = x / RMS · γ_j for one element, each step from the digits printed before it."""
    key = realmodel.norm_input(c.scn)
    tok, dim = c.rows[c.row], c.cols[c.col]
    x = c.walk.mats[key][c.row, c.col]
    rms = float(c.walk.mats["RMS"][c.row, 0])
    g = realmodel.norm_before(c.scn).gamma[c.col]
    scaled = c.printed(c.printed(x) / c.printed(rms))
    end = c.printed(scaled * c.printed(g))
    c.lands(end)
    t = c.mk.times
    return [c.prose(c.say("model.llama.rms_x_cell", x=key, token=tok)),
            f"RMS = {c.num(rms)}, γ[{dim}] = {c.num(g)}",
            *c.chain(f"X[{tok}, {dim}] = {key}[{tok}, {dim}] / RMS {t} γ[{dim}]",
                     f"{c.num(x)} / {c.num(rms)} {t} {c.operand(g)}",
                     f"{c.num(scaled)} {t} {c.operand(g)}", c.num(end))]
