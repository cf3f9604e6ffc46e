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
from attnwalk.layer import normcells
from attnwalk.layer.cells import dims_shown
from attnwalk.numbering import shown as person

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
    if layout.layer_of(c.scn).info.family == "gemma3":  # its norms around attention and the MLP
        said = "gemma3.earlier_cell"
    return [c.prose(c.say(said, layers=layer, layer=person(layer))),
            f"H[{c.rows[c.row]}] = {c.vec(c.walk.matrix('H')[c.row])}",
            *dims_shown(c, c.scn.d_model)]


@_plain
def norm_stats(c: Cell) -> list:
    key = c.stage.reads[0]  # E_sum, or H
    x = c.walk.matrix(key)[c.row]  # (d_model,)
    mu, sigma = c.walk.matrix("LN_stats")[c.row]
    name = f"{key}[{c.rows[c.row]}]"
    lines = [f"{name} = {c.vec(x)}", *dims_shown(c, len(x))]
    if c.col == 0:
        return lines + normcells.mean_lines(c, name, x, mu)[0]
    return lines + [f"μ = {c.num(mu)}"] + normcells.sigma_lines(c, name, x, mu, sigma,
                                                                layout.norm_before(c.scn).eps)[0]


@_plain
def layer_norm(c: Cell) -> list:
    key, stats = c.stage.reads  # E_sum or H, and its μ, σ
    tok, dim = c.rows[c.row], c.cols[c.col]
    x = c.walk.matrix(key)[c.row, c.col]
    mu, sigma = c.walk.matrix(stats)[c.row]
    return [c.prose(c.say("model.ln_cell", x=key, token=tok)),
            f"μ = {c.num(mu)}, σ = {c.num(sigma)}",
            *_normalized(c, f"({key}[{tok}, {dim}] {c.mk.minus} μ) / σ {c.mk.times} γ[{dim}] "
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
    said = {"llama": "model.llama.residual_cell", "gemma3": "gemma3.residual_cell"}.get(
        family, f"model.residual_cell_{family}")
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
    mean_lines, mu_shown = normcells.mean_lines(c, name, R, mu)
    sigma_lines, sigma_shown = normcells.sigma_lines(c, name, R, mu, sigma, params.eps)
    # Y's own line divides by the μ and σ just printed, not by their unrounded values: one σ a cell
    return [f"{name} = {c.vec(R)}", *dims_shown(c, len(R)), *mean_lines, *sigma_lines,
            *_normalized(c, f"Y[{tok}, {c.cols[c.col]}]", R[c.col], mu_shown, sigma_shown, params, "₂")]


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
    return [c.prose(c.say("model.glance_cell", head=person(c.col), token=tok)),
            f"A_{person(c.col)}[{tok}] = {c.vec(a)}",
            c.plain(f"entropy = {c.mk.minus}({shown}) = {c.num(total)} ") + c.say("model.bits")]


@_plain
def rms_stats(c: Cell) -> list:
    """RMS = √(mean(x²) + ε) for one row: the squares' mean, then the root; no mean is subtracted."""
    key = c.stage.reads[0]  # E_sum, or H
    tok = c.rows[c.row]
    x = c.walk.matrix(key)[c.row]  # (d_model,)
    name = f"{key}[{tok}]"
    return [c.prose(c.say("model.llama.rms_cell", x=key, token=tok)), f"{name} = {c.vec(x)}",
            *dims_shown(c, len(x)),
            *normcells.rms_lines(c, name, x, float(c.walk.matrix("RMS")[c.row, 0]),
                                 layout.norm_before(c.scn).eps)]


@_plain
def rms_norm(c: Cell) -> list:
    """X[i, j] = x / RMS · γ_j for one element, each step from the digits printed before it."""
    key, stats = c.stage.reads  # E_sum or H, and its RMS
    tok, dim = c.rows[c.row], c.cols[c.col]
    x = c.walk.matrix(key)[c.row, c.col]
    rms = float(c.walk.matrix(stats)[c.row, 0])
    g = layout.norm_before(c.scn).gamma[c.col]
    return [c.prose(c.say("model.llama.rms_x_cell", x=key, token=tok)),
            *normcells.rms_normalized_lines(c, f"X[{tok}, {dim}] = {key}[{tok}, {dim}] / RMS {c.mk.times} γ[{dim}]",
                                            x, rms, g)]


def _normalized(c: Cell, name: str, x: float, mu: float, sigma: float,
                params: layout.LayerNormParams, which: str = "") -> list:
    """(x − μ) / σ · γ + β for the cell's dimension, with this LayerNorm's γ and β."""
    return normcells.normalized_lines(c, name, x, mu, sigma, params.gamma[c.col], params.beta[c.col], which)
