"""`attnwalk model --next`: a real layer walked on to the next token. The layer's MLP is the FFN
feature's own stages (features/ffn.py: U, G, F and Y = R + F, with the model's W_1, b_1, W_2, b_2,
W_gate as the scenario's parameters); this module puts the model's norm before them and, after
them, what the model does to the end:

    LN₂(R)                 the layer's second norm (GPT-2's ln_2, Llama's post_attention_layernorm,
                           Gemma 3's pre_feedforward_layernorm), what W_1 and W_gate multiply
    G = GELU(LN₂(R)·W_gate) ⊙ U,  F̂ = RMSNorm(F)   Gemma 3's GeGLU and its norm after the FFN
    LN_f(H_L)              the remaining layers run in full, then the final norm
    ℓ, p_T                 the last token's logits ℓ = LN_f(h_n) · W_Uᵀ for the 10 highest, and
                           softmax(ℓ / T) over the whole vocabulary at T = 0.5, 1, 2

The scenario carries the models.nexttoken.NextToken as the setting "next" (commands/model.py
builds it); the features import neither the models package nor text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from attnwalk.features.model import layout
from attnwalk.layer import activations as act
from attnwalk.layer import norms, normcells, ops
from attnwalk.layer.axes import token_labels
from attnwalk.layer.cells import dims_shown
from attnwalk.layer.graph import Stage, get, insert_after, replace, symbol_of

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.graph import Context
    from attnwalk.layer.modes import Mode
    from attnwalk.scenario.scenario import Scenario

NAME = "next"
TEMPERATURES = (0.5, 1.0, 2.0)
COLUMNS = ("ℓ", "T = 0.5", "T = 1", "T = 2")  # the next stage's columns: the logit, then p at each T
NORM_KEY = "LN2"  # the FFN's pre-norm, as features/norm.py names it (its text, its place)


def active(scn: Scenario) -> bool:
    return scn.setting(NAME) is not None


def found(scn: Scenario) -> Any:
    """The models.nexttoken.NextToken the scenario was made with."""
    return scn.setting(NAME)


def _rms(scn: Scenario) -> bool:
    return found(scn).mlp.norm.kind == "rmsnorm"


def _second_norm(ctx: Context, R: np.ndarray) -> np.ndarray:
    """LN₂(R) with the layer's own γ (β), ε: what the FFN reads."""
    norm = found(ctx.scn).mlp.norm
    if norm.kind == "rmsnorm":
        return norms.rms_normalized(R, norms.rms(R, norm.eps), norm.gamma)
    return norms.normalized(R, norms.stats(R, norm.eps), norm.gamma, norm.beta)


def _norm_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    if not active(scn):
        return base
    eps = found(scn).mlp.norm.eps
    if _rms(scn):
        return f"RMSNorm₂(R) = R / RMS · γ₂,  RMS = √(mean(R[i, :]²) + ε),  ε = {eps:g}"
    return f"LN₂(R) = (R − μ) / σ · γ₂ + β₂,  μ = mean(R[i, :]),  σ = √(var(R[i, :]) + ε),  ε = {eps:g}"


def norm_cell(c: Cell) -> list:
    """One row's statistics, then this dimension normalised, each from the digits printed before it."""
    norm = found(c.scn).mlp.norm
    x_key, X = c.walk.input(c.stage, 0)
    x, tok, dim = X[c.row], c.rows[c.row], c.cols[c.col]
    name = f"{x_key}[{tok}]"
    lines: list = [f"{name} = {c.vec(x)}", *dims_shown(c, len(x))]
    if norm.kind == "rmsnorm":
        rms = float(norms.rms(x[None, :], norm.eps)[0, 0])
        return [*lines, *normcells.rms_lines(c, name, x, rms, norm.eps), *normcells.rms_normalized_lines(
            c, f"{c.sym()}[{tok}, {dim}] = {x_key}[{tok}, {dim}] / RMS {c.mk.times} γ₂[{dim}]", x[c.col], rms,
            norm.gamma[c.col])]
    mu, sigma = norms.stats(x[None, :], norm.eps)[0]
    mean_lines, mu_shown = normcells.mean_lines(c, name, x, mu)
    sigma_lines, sigma_shown = normcells.sigma_lines(c, name, x, mu, sigma, norm.eps)
    return [*lines, *mean_lines, *sigma_lines, *normcells.normalized_lines(
        c, f"{c.sym()}[{tok}, {dim}]", x[c.col], mu_shown, sigma_shown, norm.gamma[c.col], norm.beta[c.col], "₂")]


def _geglu(ctx: Context, X: np.ndarray, U: np.ndarray, W: np.ndarray) -> np.ndarray:
    return act.ACTIVATIONS["gelu"].apply(X @ W) * U  # (n, d_model) @ (d_model, d_ff) ⊙ U


def _geglu_cell(c: Cell) -> list:
    (x_key, X), U = c.walk.input(c.stage, 0), c.walk.input(c.stage, 1)[1]
    W = np.asarray(c.scn.param("W_gate"))
    tok, col = c.rows[c.row], c.cols[c.col]
    a = float(X[c.row] @ W[:, c.col])
    g = float(act.ACTIVATIONS["gelu"].apply(np.float64(a)))
    return [f"a = {symbol_of(x_key, c.scn)}[{tok}] {c.mk.dot} W_gate[:, {col}] = {c.num(a)}",
            f"GELU(a) = {c.num(g)},  U[{tok}, {col}] = {c.num(U[c.row, c.col])}",
            f"G[{tok}, {col}] = GELU(a) {c.mk.times} U = {c.num(g * U[c.row, c.col])}"]


def _post_ffn(ctx: Context, F: np.ndarray) -> np.ndarray:
    post = found(ctx.scn).mlp.post_norm  # Gemma 3's RMSNorm of the FFN's output
    return norms.rms_normalized(F, norms.rms(F, post.eps), post.gamma)


def _final(ctx: Context, Y: np.ndarray) -> np.ndarray:
    """The remaining layers ran from Y in the model (models/nexttoken.py): their final norm as made there."""
    return np.array(found(ctx.scn).final.y, dtype=np.float64)  # (n, d_model)


def _final_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    if not active(scn):
        return base
    nt, L = found(scn), layout.layer_of(scn).info.n_layers
    norm = "RMSNorm_f" if nt.final.kind == "rmsnorm" else "LN_f"
    return f"{norm}(H_{L}),  H_{L} = layer {L}'s output ({nt.remaining} layers after this one, run in full)"


def _final_cell(c: Cell) -> list:
    nt = found(c.scn)
    tok, dim = c.rows[c.row], c.cols[c.col]
    x = nt.final.x[c.row]
    lines: list = [f"H_L[{tok}] = {c.vec(x)}", *dims_shown(c, len(x))]
    if nt.final.kind == "rmsnorm":
        return [*lines, *normcells.rms_lines(c, f"H_L[{tok}]", x, float(nt.final.std[c.row]), nt.final.eps),
                *normcells.rms_normalized_lines(c, f"{c.sym()}[{tok}, {dim}] = H_L[{tok}, {dim}] / RMS "
                                                f"{c.mk.times} γ_f[{dim}]", x[c.col], float(nt.final.std[c.row]),
                                                nt.final.gamma[c.col])]
    mu, sigma = nt.final.mean[c.row], nt.final.std[c.row]
    mean_lines, mu_shown = normcells.mean_lines(c, f"H_L[{tok}]", x, mu)
    sigma_lines, sigma_shown = normcells.sigma_lines(c, f"H_L[{tok}]", x, mu, sigma, nt.final.eps)
    return [*lines, *mean_lines, *sigma_lines, *normcells.normalized_lines(
        c, f"{c.sym()}[{tok}, {dim}]", x[c.col], mu_shown, sigma_shown, nt.final.gamma[c.col],
        nt.final.beta[c.col], "_f")]


def table(nt: Any) -> np.ndarray:
    """(10, 4): each of the 10 likeliest next tokens' logit, then its p at T = 0.5, 1, 2."""
    ids = nt.top()
    ps = [ops.softmax(nt.logits / t)[ids] for t in TEMPERATURES]
    return np.stack([nt.logits[ids], *ps], axis=1)


def _next(ctx: Context, final: np.ndarray) -> np.ndarray:
    return table(found(ctx.scn))


def _next_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    if not active(scn):
        return base
    nt = found(scn)
    W_U = "E" if nt.head == "tied" else "W_U"
    return (f"ℓ = LN_f(H_L)[n] · {W_U}ᵀ,  V = {nt.logits.shape[0]:,},  "
            f"p_T(t) = exp(ℓ_t / T) / Σ_v exp(ℓ_v / T),  T = 0.5, 1, 2")  # V: the vocabulary's size


def _next_cell(c: Cell) -> list:
    """A logit as the LM head's dot product, or a probability from the logits at its temperature."""
    nt = found(c.scn)
    t_id = int(nt.top()[c.row])
    tok = c.rows[c.row]
    logit = float(nt.logits[t_id])
    if c.col == 0:
        x, w = nt.final.y[-1], nt.rows[c.row]  # the last token's row, and this token's row of W_U
        last = token_labels(c.walk.scenario.tokens)[-1]  # the last row, as the tables label it
        W_U = "E" if nt.head == "tied" else "W_U"
        return [c.prose(c.say("next.logit_cell", head=c.say(f"next.head_{nt.head}"))),
                f"LN_f(H_L)[{last}] = {c.vec(x)}", f"{W_U}[{t_id}] = {c.vec(w)}",
                *c.dot(f"ℓ[{tok}] = LN_f(H_L)[{last}] {c.mk.dot} {W_U}[{t_id}]", x, w, logit),
                *dims_shown(c, len(x))]
    T = TEMPERATURES[c.col - 1]
    top = float(nt.logits.max())
    total = float(np.exp((nt.logits - top) / T).sum())  # Σ_v exp((ℓ_v − ℓ_max) / T)
    p = float(np.exp((logit - top) / T) / total)
    return [c.prose(c.say("next.p_cell", vocab=f"{nt.logits.shape[0]:,}")),
            f"ℓ_max = {c.num(top)},  Σ_v exp((ℓ_v − ℓ_max) / {T:g}) = {c.num(total)}",
            f"p[{tok}] = exp(({c.num(logit)} − {c.num(top)}) / {T:g}) / {c.num(total)} = {c.num(p)}"]


STAGES = (
    Stage("final", "LN_f(H_L)", "LN_f(H_L)", "n", "d_model", _final, formula_for=_final_formula,
          worked=_final_cell, aliases=("final_norm", "ln_f", "h_l")),
    Stage("next", "ℓ, p_T", "p_T = softmax(ℓ / T)", "top", "ℓ, T", _next, reads=("final",),
          formula_for=_next_formula, worked=_next_cell, aliases=("logits", "prediction", "next_token")),
    Stage("F_post", "F̂", "F̂ = RMSNorm(F)", "n", "d_model", _post_ffn, reads=("F",),
          aliases=("post_ffn", "f_hat")),
)
_POST = STAGES[2]


def export(walk: Any, data: dict[str, Any]) -> None:
    """`--format json`: the 10 likeliest next tokens (text, id, logit, p at T = 1, p at each T),
    the temperatures, and whether the LM head is tied to the embeddings or its own lm_head."""
    nt = found(walk.scenario)
    rows = table(nt)
    data["temperatures"] = list(TEMPERATURES)
    data["lm_head"] = nt.head
    data["next"] = [{"token": text, "id": int(token_id), "logit": float(row[0]), "p": float(row[2]),
                     "p_T": {f"{t:g}": float(p) for t, p in zip(TEMPERATURES, row[1:])}}
                    for text, token_id, row in zip(nt.texts, nt.top(), rows)]


def extend(stages: list[Stage], scn: Scenario) -> None:
    """After the FFN feature's stages: the model's own norm before U (and the gate), Gemma's GeGLU
    and its norm after F, then the remaining layers' final norm and the next token."""
    from attnwalk.features.norm import SECOND

    nt = found(scn)
    stream = get(stages, "U").reads[0]  # the layer's residual sum R, what the FFN was placed after
    symbol = "RMSNorm₂(R)" if _rms(scn) else "LN₂(R)"
    norm = SECOND._replace(symbol=symbol, reads=(stream,), compute=_second_norm, params=(),
                           formula_for=_norm_formula, worked=norm_cell, variants=lambda scn, mode: (),
                           step=lambda scn, mode, r: f"{symbol[:-3]}({r})", backward=None)
    insert_after(stages, stream, norm)
    replace(stages, "U", reads=(NORM_KEY,))
    gate = get(stages, "G")
    if gate.params:  # SwiGLU (Llama), GeGLU (Gemma 3): the gate reads the norm too
        replace(stages, "G", reads=(NORM_KEY, "U"))
    if nt.mlp.kind == "geglu":
        replace(stages, "G", compute=_geglu, worked=_geglu_cell, backward=None,
                variants=lambda scn, mode: ("geglu",),
                formula_for=lambda base, scn, mode, stage: "G = GELU(RMSNorm₂(R) · W_gate) ⊙ U",
                step=lambda scn, mode, h, u: f"GELU({h} · W_gate) ⊙ {u}")
    total = next(s for s in stages if s.reads[-1:] == ("F",) and s.reads[0] == stream)
    if nt.mlp.post_norm is not None:
        insert_after(stages, "F", _POST)
        replace(stages, total.key, reads=(stream, "F_post"),
                formula_for=lambda base, scn, mode, stage: "Y = R + F̂")
    replace(stages, total.key, variants=lambda scn, mode: ("model",))  # its text: R, the LM head after
    for key in ("U", "G", "F", total.key):  # a model's feed-forward: no gradient worked out here, and
        # no W_1, W_gate, W_2 in the export (3 · d_model · d_ff numbers, SmolLM2's 2.65 million)
        replace(stages, key, backward=None, weight_exported=False)
    insert_after(stages, total.key, STAGES[0]._replace(reads=(total.key,)), STAGES[1])
