"""How one cell of a real model's own stages is worked out (the stages in __init__.py), written
against the same Cell as layer/cells.py: every equation holds for the digits it prints, and every
row, dimension and head is written as the tables label it, from 1.

A model's rows are d_model = 384 (or 768) wide, so a vector is printed with its middle elided;
`dims_shown` says which dimensions a printed vector holds.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from attnwalk.features.model import layout
from attnwalk.layer.cells import dims_shown

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell


def _plain(recipe: Callable[[Cell], list]) -> Callable[[Cell], list]:
    """A recipe whose lines of math (μ, σ, γ, β, Σ, √, ²) are spelled in ASCII under --ascii."""
    @functools.wraps(recipe)
    def worked(c: Cell) -> list:
        return [c.plain(line) if isinstance(line, str) else line for line in recipe(c)]
    return worked


@_plain
def segment(c: Cell) -> list:
    tok = c.rows[c.row]
    row = c.walk.matrix("E_seg")[c.row]
    key = "model.segment_cell_one_type" if layout.fairseq_positions(c.scn) else "model.segment_cell"
    return [c.prose(c.say(key)), f"E_seg[{tok}] = W_seg[0] = {c.vec(row)}",
            *dims_shown(c, len(row))]


@_plain
def embedding_sum(c: Cell) -> list:
    tok, r, j = c.rows[c.row], c.row, c.col
    if layout.rms(c.scn):  # the Llama family: no position table, E_sum is E itself
        row = c.walk.matrix("E")[r]
        return [f"E_sum[{tok}] = E[{tok}] = {c.vec(row)}",
                f"E_sum[{tok}, {c.cols[j]}] = E[{tok}, {c.cols[j]}] = {c.num(row[j])}"]
    keys = list(c.stage.reads)  # E, P (and BERT's E_seg)
    parts = [c.walk.matrix(k)[r] for k in keys]
    total = c.walk.matrix("E_sum")[r]
    names = " + ".join(f"{k}[{tok}]" for k in keys)
    # the element worked: each term as printed, summed as a learner adds them
    added = c.printed(sum(c.printed(p[j]) for p in parts))
    c.lands(added)
    terms = " + ".join(c.num(p[j]) if i == 0 else c.operand(p[j]) for i, p in enumerate(parts))
    element = " + ".join(f"{k}[{tok}, {c.cols[j]}]" for k in keys)
    return [*c.chain(f"E_sum[{tok}] = {names}", " + ".join(c.vec(p) for p in parts), c.vec(total)),
            *dims_shown(c, len(total)),
            f"{element} = {terms} = {c.num(added)}"]


@_plain
def earlier(c: Cell) -> list:
    layer = layout.layer_of(c.scn).layer
    said = "model.llama.earlier_cell" if layout.rms(c.scn) else "model.earlier_cell"  # RMSNorm, SwiGLU
    return [c.prose(c.say(said, layers=layer, layer=layer + 1)),
            f"H[{c.rows[c.row]}] = {c.vec(c.walk.matrix('H')[c.row])}",
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
    key = c.stage.reads[0]  # E_sum, or H
    x = c.walk.matrix(key)[c.row]  # (d_model,)
    mu, sigma = c.walk.matrix("LN_stats")[c.row]
    name = f"{key}[{c.rows[c.row]}]"
    lines = [f"{name} = {c.vec(x)}", *dims_shown(c, len(x))]
    if c.col == 0:
        return lines + _mean_lines(c, name, x, mu)[0]
    return lines + [f"μ = {c.num(mu)}"] + _sigma_lines(c, name, x, mu, sigma,
                                                       layout.norm_before(c.scn).eps)[0]


def _normalized_cell(c: Cell, name: str, x: float, mu: float, sigma: float,
                     params: layout.LayerNormParams, which: str = "") -> list:
    """(x − μ) / σ · γ + β for one element, each step from the digits printed before it; `which`
    tells a second LayerNorm's γ₂, β₂ from the first's."""
    j, minus, t = c.col, c.mk.minus, c.mk.times
    g, b = params.gamma[j], params.beta[j]
    dim = c.cols[j]  # as the tables label it, from 1
    centred = c.printed(c.printed(x) - c.printed(mu))
    scaled = c.printed(centred / c.printed(sigma))
    stretched = c.printed(scaled * c.printed(g))
    end = c.printed(stretched + c.printed(b))
    c.lands(end)
    return [c.plain(f"γ{which}[{dim}] = {c.num(g)}, β{which}[{dim}] = {c.num(b)}"),
            *c.chain(f"{name} = ({c.num(x)} {minus} {c.operand(mu)}) / {c.num(sigma)} {t} "
                     f"{c.operand(g)} + {c.operand(b)}",
                     f"{c.num(centred)} / {c.num(sigma)} {t} {c.operand(g)} + {c.operand(b)}",
                     f"{c.num(scaled)} {t} {c.operand(g)} + {c.operand(b)}",
                     f"{c.num(stretched)} + {c.operand(b)}", c.num(end))]


@_plain
def layer_norm(c: Cell) -> list:
    key, stats = c.stage.reads  # E_sum or H, and its μ, σ
    tok, dim = c.rows[c.row], c.cols[c.col]
    x = c.walk.matrix(key)[c.row, c.col]
    mu, sigma = c.walk.matrix(stats)[c.row]
    return [c.prose(c.say("model.ln_cell", x=key, token=tok)),
            f"μ = {c.num(mu)}, σ = {c.num(sigma)}",
            *_normalized_cell(c, f"({key}[{tok}, {dim}] {c.mk.minus} μ) / σ {c.mk.times} γ[{dim}] "
                              f"+ β[{dim}]", x, mu, sigma, layout.norm_before(c.scn))]


@_plain
def residual(c: Cell) -> list:
    key, out = c.stage.reads  # X or the stream before the norm, and O
    tok, j = c.rows[c.row], c.col
    dim = c.cols[j]  # as the tables label it, from 1
    a, o = c.walk.matrix(key)[c.row, j], c.walk.matrix(out)[c.row, j]
    added = c.printed(c.printed(a) + c.printed(o))
    c.lands(added)
    family = layout.layer_of(c.scn).info.family
    said = "model.llama.residual_cell" if family == "llama" else f"model.residual_cell_{family}"
    return [c.prose(c.say(said, x=key)),
            f"R[{tok}, {dim}] = {key}[{tok}, {dim}] + {out}[{tok}, {dim}] = {c.num(a)} + {c.operand(o)} "
            f"= {c.num(added)}"]


@_plain
def after_norm(c: Cell) -> list:
    params = layout.norm_after(c.scn)
    R = c.walk.matrix("R")[c.row]  # (d_model,)
    mu, sigma = layout.stats(R[None, :], params.eps)[0]
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
    a = c.walk.matrix("A", c.col)[c.row]  # (m,) head c.col's weights, as its own walk computed them
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
    key = c.stage.reads[0]  # E_sum, or H
    tok = c.rows[c.row]
    x = c.walk.matrix(key)[c.row]  # (d_model,)
    eps = layout.norm_before(c.scn).eps
    name = f"{key}[{tok}]"
    squares = float(np.mean(x ** 2))
    root = c.printed(np.sqrt(c.printed(squares) + eps))
    c.lands(root, on=float(c.walk.matrix("RMS")[c.row, 0]))
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
    key, stats = c.stage.reads  # E_sum or H, and its RMS
    tok, dim = c.rows[c.row], c.cols[c.col]
    x = c.walk.matrix(key)[c.row, c.col]
    rms = float(c.walk.matrix(stats)[c.row, 0])
    g = layout.norm_before(c.scn).gamma[c.col]
    scaled = c.printed(c.printed(x) / c.printed(rms))
    end = c.printed(scaled * c.printed(g))
    c.lands(end)
    t = c.mk.times
    return [c.prose(c.say("model.llama.rms_x_cell", x=key, token=tok)),
            f"RMS = {c.num(rms)}, γ[{dim}] = {c.num(g)}",
            *c.chain(f"X[{tok}, {dim}] = {key}[{tok}, {dim}] / RMS {t} γ[{dim}]",
                     f"{c.num(x)} / {c.num(rms)} {t} {c.operand(g)}",
                     f"{c.num(scaled)} {t} {c.operand(g)}", c.num(end))]
