"""A norm before the projections (`norm: layer | rms`), as every real Transformer has one: each
token's row of X is normalised on its own before W_Q, W_K and W_V read it.

    norm: layer   LN(X) = (X − μ) / σ · γ + β,   μ = mean(x),  σ = √(var(x) + ε)   (Ba et al., 2016)
    norm: rms     RMSNorm(X) = X / RMS · γ,      RMS = √(mean(x²) + ε)            (Zhang & Sennrich, 2019)

`norm_gamma` and `norm_beta` (d_model numbers each; ones and zeros unless given; β only with
layer) and `norm_eps` (1e-5 unless given) are optional. The stage LN stands between X and the
projections (and, in cross-attention, between the source's X and K, V), so Q, K and V read it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attnwalk.layer import normcells, norms
from attnwalk.layer.axes import token_labels
from attnwalk.layer.cells import dims_shown
from attnwalk.layer.graph import Stage, amend, has, insert_after, reroute

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.graph import Context
    from attnwalk.layer.modes import Mode
    from attnwalk.layer.walk import Walk
    from attnwalk.scenario.load import Draft
    from attnwalk.scenario.scenario import Scenario

NAME = "norm"
KEYS = ("norm", "norm_gamma", "norm_beta", "norm_eps")
KINDS = ("layer", "rms")


class Norm(NamedTuple):
    kind: str  # "layer" | "rms"
    eps: float = 1e-5


def active(scn: Scenario) -> bool:
    return scn.setting(NAME) is not None


def read(d: Draft) -> None:
    f, top = d.f, d.top
    if "norm" not in top:
        for key in KEYS[1:]:
            if key in top:
                raise f.error(key, top[key], f"{key} is only used with norm: layer or norm: rms; "
                              "remove it, or add norm")
        return
    kind = f.choice(top["norm"], "norm", KINDS)
    eps = 1e-5
    if "norm_eps" in top:
        eps = f.number(top["norm_eps"], "norm_eps")
        if not eps > 0:
            raise f.error("norm_eps", top["norm_eps"], f"norm_eps must be greater than 0, got {eps:g} "
                          "(1e-5 is usual): it keeps the root from being 0 for a row of equal numbers")
    if kind == "rms" and "norm_beta" in top:
        raise f.error("norm_beta", top["norm_beta"], "norm_beta is only used with norm: layer "
                      "(RMSNorm has no β); remove it, or use norm: layer")
    d_model = d.main.d_model
    for key, default in (("norm_gamma", np.ones(d_model)), ("norm_beta", np.zeros(d_model))):
        if key == "norm_beta" and kind == "rms":
            continue
        value = f.vector(top[key], key) if key in top else default
        if value.shape[0] != d_model:
            raise f.error(key, top[key], f"{key} has {value.shape[0]} numbers, but d_model is "
                          f"{d_model}: one for each column of X")
        d.params[key] = value
    d.settings[NAME] = Norm(kind, eps)


def _norm(scn: Scenario) -> Norm:
    return scn.setting(NAME) or Norm("layer")  # (LN's text, asked of a layer without it: explain, the text checks)


def _normalized(ctx: Context, X: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None = None) -> np.ndarray:
    norm = _norm(ctx.scn)
    if norm.kind == "rms":
        return norms.rms_normalized(X, norms.rms(X, norm.eps), gamma)  # (n, d_model)
    return norms.normalized(X, norms.stats(X, norm.eps), gamma, beta)  # (n, d_model)


def _formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    if scn.setting(NAME) is None:  # LN asked of a layer without it (explain's catalog): as written
        return base
    norm, x = _norm(scn), stage.reads[0]
    if norm.kind == "rms":
        return f"RMSNorm({x}) = {x} / RMS · γ,  RMS = √(mean({x}[i, :]²) + ε),  ε = {norm.eps:g}"
    return (f"LN({x}) = ({x} − μ) / σ · γ + β,  μ = mean({x}[i, :]),  σ = √(var({x}[i, :]) + ε),"
            f"  ε = {norm.eps:g}")


def _variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    return ("rms",) if _norm(scn).kind == "rms" else ()


def cell(c: Cell) -> list:
    """One row's statistics, then this dimension normalised: the mean and σ (LayerNorm) or the RMS
    (RMSNorm), each from the digits printed before it."""
    norm = _norm(c.scn)
    x_key, X = c.walk.input(c.stage, 0)
    x = X[c.row]  # (d_model,)
    tok, dim = c.rows[c.row], c.cols[c.col]
    name = f"{x_key}[{tok}]"
    gamma = c.scn.param("norm_gamma")[c.col]
    lines: list = [f"{name} = {c.vec(x)}", *dims_shown(c, len(x))]
    if norm.kind == "rms":
        rms = float(norms.rms(x[None, :], norm.eps)[0, 0])
        lines += normcells.rms_lines(c, name, x, rms, norm.eps)
        return lines + normcells.rms_normalized_lines(
            c, f"{c.sym()}[{tok}, {dim}] = {x_key}[{tok}, {dim}] / RMS {c.mk.times} γ[{dim}]", x[c.col], rms, gamma)
    mu, sigma = norms.stats(x[None, :], norm.eps)[0]
    mean_lines, mu_shown = normcells.mean_lines(c, name, x, mu)
    sigma_lines, sigma_shown = normcells.sigma_lines(c, name, x, mu, sigma, norm.eps)
    beta = c.scn.param("norm_beta")[c.col]
    return [*lines, *mean_lines, *sigma_lines,
            *normcells.normalized_lines(c, f"{c.sym()}[{tok}, {dim}]", x[c.col], mu_shown, sigma_shown,
                                        gamma, beta)]


def _step(scn: Scenario, mode: Mode, x: str) -> str:
    return f"RMSNorm({x})" if _norm(scn).kind == "rms" else f"LN({x})"


STAGES = (
    Stage("LN", "LN(X)", "LN(X) = (X − μ) / σ · γ + β", "n", "d_model", _normalized, reads=("X",),
          params=("norm_gamma", "norm_beta"), formula_for=_formula, variants=_variants, worked=cell,
          overflow="use smaller embeddings or a larger norm_eps", aliases=("norm", "ln", "layernorm", "rmsnorm"),
          step=_step),
)


def extend(stages: list[Stage], scn: Scenario) -> None:
    stage = STAGES[0]
    if _norm(scn).kind == "rms":  # no β, and its own name
        stage = stage._replace(symbol="RMSNorm(X)", params=("norm_gamma",))
    insert_after(stages, "X", stage)
    reroute(stages, "X", "LN", readers=("Q", "K", "V"))  # the projections read the normalised rows
    if has(stages, "X_src"):  # a source is normalised too, with the same γ and β, before K and V
        insert_after(stages, "X_src", stage._replace(key="LN_src", symbol=stage.symbol.replace("X", "X_src"),
                                                     rows="m", reads=("X_src",), shown=False))
        reroute(stages, "X_src", "LN_src", readers=("K", "V"))
    amend(stages, "X", notes=lambda scn, mode, notes: [*notes, "norm.x_note"])
    for key in ("Q", "K", "V"):  # made from the normalised rows: their text says so
        amend(stages, key, variants=lambda scn, mode, names: ("normed", *names))
    # nothing else changes: decode, tiles, compare, export and the quiz read the graph


# -- the layer_norm lesson's own questions (tutor/lessonquiz.py asks them; their text is
# quiz.lesson.layer_norm.*): the numbers each needs, or None where the walk has no norm

def _rows(walk: Walk) -> tuple[np.ndarray, np.ndarray] | None:
    return (walk.mats["X"], walk.mats["LN"]) if walk.has("LN") else None  # (n, d_model) each


def _stretched(walk: Walk) -> dict | None:
    """The quietest token's row: how long it is after the norm (√d_model: stretched, not kept)."""
    if (rows := _rows(walk)) is None:
        return None
    X, LN = rows
    i = int(np.argmin(np.linalg.norm(X, axis=1)))
    return {"token": token_labels(walk.scenario.tokens)[i], "x": X[i], "before": float(np.linalg.norm(X[i])),
            "after": float(np.linalg.norm(LN[i])), "d_model": X.shape[1], "sigma": float(np.std(X[i]))}


def _doubled(walk: Walk) -> dict | None:
    """The loudest token's row doubled: LN divides by the row's own σ, which doubles with it."""
    if (rows := _rows(walk)) is None:
        return None
    X, LN = rows
    i = int(np.argmax(np.linalg.norm(X, axis=1)))
    return {"token": token_labels(walk.scenario.tokens)[i], "x": X[i], "doubled": 2 * X[i], "ln": LN[i]}


QUESTIONS = {"layer_norm": {"stretched": _stretched, "doubled": _doubled}}
