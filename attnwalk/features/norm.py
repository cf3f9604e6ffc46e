"""A norm before the projections (`norm: layer | rms`), as every real Transformer has one: each
token's row of X is normalised on its own before W_Q, W_K and W_V read it.

    norm: layer   LN(X) = (X − μ) / σ · γ + β,   μ = mean(x),  σ = √(var(x) + ε)   (Ba et al., 2016)
    norm: rms     RMSNorm(X) = X / RMS · γ,      RMS = √(mean(x²) + ε)            (Zhang & Sennrich, 2019)

`norm_gamma` and `norm_beta` (d_model numbers each; ones and zeros unless given; β only with
layer) and `norm_eps` (1e-5 unless given) are optional. The stage LN stands between X and the
projections (and, in cross-attention, between the source's X and K, V), so Q, K and V read it.

`norm_placement: pre | post` says where the norms of a block stand (pre unless given):

    pre    GPT-2, Llama: LN(X) before the projections, LN₂(H) before the FFN; the residual
           stream itself is never normalised (H = X + O, Y = H + F)
    post   the original Transformer (Vaswani et al., 2017) and BERT: each residual sum is
           normalised, LN(X + O) and LN₂(LN(H) + F); the projections read X itself

The second norm's γ₂, β₂ are the FFN's keys `ffn_norm_gamma`, `ffn_norm_beta` (features/ffn.py
reads them with `read_gamma_beta`). The residual and the FFN put these norms in the graph where
`after_sum` and `before_ffn` say: the norm's kind and placement are asked of this module alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attnwalk.layer import normcells, norms
from attnwalk.layer.axes import token_labels
from attnwalk.layer.cells import dims_shown
from attnwalk.layer.graph import Stage, amend, has, insert_after, reroute, symbol_of

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.graph import Context
    from attnwalk.layer.modes import Mode
    from attnwalk.layer.walk import Walk
    from attnwalk.scenario.load import Draft
    from attnwalk.scenario.scenario import Scenario

NAME = "norm"
KEYS = ("norm", "norm_gamma", "norm_beta", "norm_eps", "norm_placement")
KINDS = ("layer", "rms")
PLACEMENTS = ("pre", "post")


class Norm(NamedTuple):
    kind: str  # "layer" | "rms"
    eps: float = 1e-5
    placement: str = "pre"  # "pre" | "post"


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
    placement = f.choice(top["norm_placement"], "norm_placement", PLACEMENTS) if "norm_placement" in top else "pre"
    eps = 1e-5
    if "norm_eps" in top:
        eps = f.number(top["norm_eps"], "norm_eps")
        if not eps > 0:
            raise f.error("norm_eps", top["norm_eps"], f"norm_eps must be greater than 0, got {eps:g} "
                          "(1e-5 is usual): it keeps the root from being 0 for a row of equal numbers")
    d.params.update(gamma_beta(f, top, ("norm_gamma", "norm_beta"), kind, d.main.d_model,
                               "d_model is {width}: one for each column of X", "norm: layer"))
    d.settings[NAME] = Norm(kind, eps, placement)


def gamma_beta(f, top: dict, keys: tuple[str, str], kind: str, width: int, columns: str,
               layer: str) -> dict[str, np.ndarray]:
    """A norm's γ and β, read from `keys` (ones and zeros unless given; no β under RMSNorm, a β
    given there refused): each `width` numbers, `columns` saying what they are for ({width}),
    `layer` the setting that allows β. Every norm a layer has reads its own this way (before the
    projections, the FFN's, the final one)."""
    gamma, beta = keys
    if kind == "rms" and beta in top:
        raise f.error(beta, top[beta], f"{beta} is only used with {layer} (RMSNorm has no β); "
                      f"remove it, or use {layer}")
    out = {}
    for key, default in ((gamma, np.ones(width)), (beta, np.zeros(width))):
        if key == beta and kind == "rms":
            continue
        value = f.vector(top[key], key) if key in top else default
        if value.shape[0] != width:
            raise f.error(key, top[key], f"{key} has {value.shape[0]} numbers, but "
                          + columns.format(width=width))
        out[key] = value
    return out


def read_gamma_beta(d: Draft, gamma: str, beta: str) -> None:
    """A second norm's γ and β (`gamma`, `beta`: its keys; ones and zeros unless given; no β
    under RMSNorm) into d.params, or an error naming a key given without `norm`."""
    f, top, norm = d.f, d.top, d.settings.get(NAME)
    if norm is None:
        for key in (gamma, beta):
            if key in top:
                raise f.error(key, top[key], f"{key} is the γ or β of the norm before the FFN, and there "
                              "is no norm: add norm: layer or norm: rms, or remove it")
        return
    d.params.update(gamma_beta(f, top, (gamma, beta), norm.kind, d.main.d_model,
                               "d_model is {width}: one for each column of the residual stream",
                               "norm: layer"))


def placed_after_sums(d: Draft) -> bool:
    """Does the draft's norm stand after each residual sum (norm_placement: post)?"""
    norm = d.settings.get(NAME)
    return norm is not None and norm.placement == "post"


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
    norm, x = _norm(scn), symbol_of(stage.reads[0], scn)
    g, b = _which(stage)
    name = f"{'RMSNorm' if norm.kind == 'rms' else 'LN'}{g}({x})"  # LN(X), LN₂(H), RMSNorm(X), …
    if norm.kind == "rms":
        return f"{name} = {x} / RMS · γ{g},  RMS = √(mean({x}[i, :]²) + ε),  ε = {norm.eps:g}"
    return (f"{name} = ({x} − μ) / σ · γ{g} + β{b},  μ = mean({x}[i, :]),  σ = √(var({x}[i, :]) + ε),"
            f"  ε = {norm.eps:g}")


def _which(stage: Stage) -> tuple[str, str]:
    """How γ and β are subscripted: the first norm's plain, the second's (the FFN's) γ₂, β₂."""
    return ("₂", "₂") if stage.params[0].startswith("ffn_norm") else ("", "")  # (block b's: ffn_norm_gamma.b)


def _variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    norm = _norm(scn)
    return ("post",) if norm.placement == "post" else ("rms",) if norm.kind == "rms" else ()


def cell(c: Cell) -> list:
    """One row's statistics, then this dimension normalised: the mean and σ (LayerNorm) or the RMS
    (RMSNorm), each from the digits printed before it."""
    norm = _norm(c.scn)
    x_key, X = c.walk.input(c.stage, 0)
    x_key = symbol_of(x_key, c.scn)  # X; the residual stream's H
    x = X[c.row]  # (d_model,)
    tok, dim = c.rows[c.row], c.cols[c.col]
    name = f"{x_key}[{tok}]"
    gamma = c.scn.param(c.stage.params[0])[c.col]
    which = _which(c.stage)[0]
    lines: list = [f"{name} = {c.vec(x)}", *dims_shown(c, len(x))]
    if norm.kind == "rms":
        rms = float(norms.rms(x[None, :], norm.eps)[0, 0])
        lines += normcells.rms_lines(c, name, x, rms, norm.eps)
        return lines + normcells.rms_normalized_lines(
            c, f"{c.sym()}[{tok}, {dim}] = {x_key}[{tok}, {dim}] / RMS {c.mk.times} γ{which}[{dim}]", x[c.col], rms, gamma,
            which)
    mu, sigma = norms.stats(x[None, :], norm.eps)[0]
    mean_lines, mu_shown = normcells.mean_lines(c, name, x, mu)
    sigma_lines, sigma_shown = normcells.sigma_lines(c, name, x, mu, sigma, norm.eps)
    beta = c.scn.param(c.stage.params[1])[c.col]
    return [*lines, *mean_lines, *sigma_lines,
            *normcells.normalized_lines(c, f"{c.sym()}[{tok}, {dim}]", x[c.col], mu_shown, sigma_shown,
                                        gamma, beta, which)]


def _step(scn: Scenario, mode: Mode, x: str) -> str:
    return f"RMSNorm({x})" if _norm(scn).kind == "rms" else f"LN({x})"


def _step2(scn: Scenario, mode: Mode, x: str) -> str:
    return f"RMSNorm₂({x})" if _norm(scn).kind == "rms" else f"LN₂({x})"


def _rule(scn: Scenario) -> tuple[str, float]:
    norm = _norm(scn)
    return norm.kind, norm.eps


def grad_variants(scn: Scenario) -> tuple[str, ...]:
    """The backward walk's text variants: ∂L/∂X goes back through the norm (rms: RMSNorm's); not
    under post placement, where the projections read X itself."""
    if _norm(scn).placement == "post":
        return ()
    return ("rms", "normed") if _norm(scn).kind == "rms" else ("normed",)


STAGES = (
    Stage("LN", "LN(X)", "LN(X) = (X − μ) / σ · γ + β", "n", "d_model", _normalized, reads=("X",),
          params=("norm_gamma", "norm_beta"), formula_for=_formula, variants=_variants, worked=cell,
          overflow="use smaller embeddings or a larger norm_eps", aliases=("norm", "ln", "layernorm", "rmsnorm"),
          step=_step, backward=normcells.backward(_rule, {"norm_gamma": "γ", "norm_beta": "β"})),
)



_BACK = normcells.backward(_rule, {"norm_gamma": "γ", "norm_beta": "β"})
_BACK2 = normcells.backward(_rule, {"ffn_norm_gamma": "γ₂", "ffn_norm_beta": "β₂"})
# the norm before the FFN (pre) or after its residual sum (post), with γ₂, β₂; placed by after_sum
# and before_ffn, which the residual and the FFN call
SECOND = Stage("LN2", "LN₂(H)", "LN₂(H) = (H − μ) / σ · γ₂ + β₂", "n", "d_model", _normalized,
               reads=("H",), params=("ffn_norm_gamma", "ffn_norm_beta"), formula_for=_formula,
               variants=lambda scn, mode: ("post",) if _norm(scn).placement == "post" else (),
               worked=cell, overflow="use a smaller W_O or W_2, or a larger norm_eps",
               aliases=("ln2", "ln_2", "norm2"), step=_step2, backward=_BACK2)
STAGES += (SECOND,)


def extend(stages: list[Stage], scn: Scenario) -> None:
    if _norm(scn).placement == "post":  # the norms stand after the residual sums (after_sum)
        return
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


def _second_norm(scn: Scenario, template: Stage, reads: str, symbol: str) -> Stage:
    """`template` (LN or LN₂) reading stage `reads`, printed `symbol` of that stage's symbol; RMSNorm
    has no β."""
    rms = _norm(scn).kind == "rms"
    name = symbol.replace("LN", "RMSNorm") if rms else symbol
    return template._replace(symbol=name, reads=(reads,), params=template.params[:1] if rms else template.params)


def after_sum(scn: Scenario, reads: str, symbol: str, second: bool) -> tuple[Stage, ...]:
    """The norm that stands after a residual sum (stage `reads`, printed `symbol`): under
    norm_placement: post, LN(H)
    after attention's sum (`second` False, γ and β) or LN₂(Y) after the FFN's (γ₂, β₂); none under
    pre or without a norm."""
    if scn.setting(NAME) is None or _norm(scn).placement != "post":
        return ()
    x = symbol
    if second:
        return (_second_norm(scn, SECOND, reads, f"LN₂({x})"),)
    first = STAGES[0]._replace(variants=_variants, aliases=("norm", "ln", "layernorm", "rmsnorm", "ln1"))
    return (_second_norm(scn, first, reads, f"LN({x})"),)


def before_ffn(scn: Scenario, reads: str, symbol: str) -> tuple[Stage, ...]:
    """The norm the FFN's input goes through (norm_placement: pre): LN₂(H) with γ₂, β₂, reading
    stage `reads` (printed `symbol`); none under post or without a norm."""
    if scn.setting(NAME) is None or _norm(scn).placement != "pre":
        return ()
    return (_second_norm(scn, SECOND, reads, f"LN₂({symbol})"),)


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
