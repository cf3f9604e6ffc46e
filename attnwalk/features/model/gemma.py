"""What a Gemma 3 layer adds to the Llama family's walk (the model feature calls `extend` for a
layer that has QK-norm):

    E_sum = E · √d_model           the token rows scaled before the first layer
    Q̂ = RMSNorm(q) · γ_q,  K̂ = …   QK-norm: each head's q and k normalised, what RoPE then turns
    Ô = RMSNorm(O) · γ_O           the norm after attention, on the output; R = H + Ô

Every γ is the number the GGUF stores: Gemma's norms multiply by (1 + w), and llama.cpp's converter
stores 1 + w, so x / RMS · γ is the formula that holds for the stored numbers.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from attnwalk.features.model import layout
from attnwalk.layer import normcells
from attnwalk.layer.graph import Stage, get, insert_after, insert_before, replace, reroute

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.graph import Context
    from attnwalk.scenario.scenario import Scenario


def active(scn: Scenario) -> bool:
    layer = layout.layer_of(scn)
    return layer is not None and getattr(layer, "q_norm", None) is not None


def _norm_of(scn: Scenario, stage_key: str) -> tuple[np.ndarray, float]:
    layer = layout.layer_of(scn)
    gamma, eps = {"Q_hat": layer.q_norm, "K_hat": layer.k_norm, "O_post": layer.post_norm}[stage_key]
    return np.asarray(gamma, dtype=np.float64), float(eps)


def _rms_normed(M: np.ndarray, gamma: np.ndarray, eps: float) -> np.ndarray:
    rms = np.sqrt((M ** 2).mean(axis=-1, keepdims=True) + eps)  # (n, 1)
    return M / rms * gamma


def _q_hat(ctx: Context, Q: np.ndarray) -> np.ndarray:
    return _rms_normed(Q, *_norm_of(ctx.scn, "Q_hat"))  # (n, d_k): this head's queries


def _k_hat(ctx: Context, K: np.ndarray) -> np.ndarray:
    return _rms_normed(K, *_norm_of(ctx.scn, "K_hat"))  # (m, d_k): this K/V head's keys


def _o_post(ctx: Context, O: np.ndarray) -> np.ndarray:
    return _rms_normed(O, *_norm_of(ctx.scn, "O_post"))  # (n, d_model)


def _scaled(ctx: Context, E: np.ndarray, *rest: np.ndarray) -> np.ndarray:
    return E * math.sqrt(ctx.scn.d_model)  # P is 0: RoPE turns q and k instead


def normed_cell(c: Cell) -> list:
    """One element of Q̂, K̂ or Ô: its row's RMS, then x / RMS · γ, each from the printed digits."""
    key, X = c.walk.input(c.stage, 0, c.head if c.stage.per_head else None)
    x = X[c.row]  # (width,): one head's q or k, or one row of O
    gamma, eps = _norm_of(c.scn, c.stage.key)
    tok, dim = c.rows[c.row], c.cols[c.col]
    rms = float(np.sqrt(np.mean(x ** 2) + eps))
    name = f"{key}[{tok}]"
    return [c.prose(c.say(f"gemma3.cell.{c.stage.key}", x=key, token=tok, width=len(x))),
            f"{name} = {c.vec(x)}",
            c.plain(f"RMS = {c.mk.sqrt}(mean({name}²) + ε) = {c.mk.sqrt}({c.num(float(np.mean(x ** 2)))} + {eps:g})"
                    f" = {c.num(rms)}"),
            *normcells.rms_normalized_lines(
                c, f"{c.stage.symbol}[{tok}, {dim}] = {key}[{tok}, {dim}] / RMS {c.mk.times} γ[{dim}]",
                float(x[c.col]), rms, float(gamma[c.col]))]


def scaled_cell(c: Cell) -> list:
    tok, dim = c.rows[c.row], c.cols[c.col]
    e = float(c.walk.matrix("E")[c.row, c.col])
    root = c.printed(math.sqrt(c.scn.d_model))
    end = c.printed(c.printed(e) * root)
    c.lands(end)
    return [c.prose(c.say("gemma3.cell.E_sum", d_model=c.scn.d_model)),
            c.plain(f"E_sum[{tok}, {dim}] = E[{tok}, {dim}] {c.mk.times} {c.mk.sqrt}{c.scn.d_model} = "
                    f"{c.num(e)} {c.mk.times} {c.num(root)} = {c.num(end)}")]


def _formula(base: str, scn: Scenario, mode, stage: Stage) -> str:
    if not active(scn):  # asked of a layer without the stage: the definition's own
        return base
    eps = _norm_of(scn, stage.key)[1]
    return f"{base},  ε = {eps:g}"


_HAT = "\u0302"
STAGES = (
    Stage("Q_hat", f"Q{_HAT}", f"Q{_HAT}[i, :] = Q[i, :] / √(mean(Q[i, :]²) + ε) · γ_q", "n", "d_k", _q_hat,
          reads=("Q",), per_head=True, formula_for=_formula, worked=normed_cell,
          aliases=("qhat", "q_norm", "qnorm"), step=lambda scn, mode, q: f"RMSNorm({q}) · γ_q"),
    Stage("K_hat", f"K{_HAT}", f"K{_HAT}[j, :] = K[j, :] / √(mean(K[j, :]²) + ε) · γ_k", "m", "d_k", _k_hat,
          reads=("K",), per_head=True, formula_for=_formula, worked=normed_cell,
          aliases=("khat", "k_norm", "knorm"), step=lambda scn, mode, k: f"RMSNorm({k}) · γ_k"),
    Stage("O_post", f"O{_HAT}", f"O{_HAT}[i, :] = O[i, :] / √(mean(O[i, :]²) + ε) · γ_O", "n", "d_model", _o_post,
          reads=("O",), formula_for=_formula, worked=normed_cell,
          aliases=("opost", "post_norm", "post_attention_norm"), step=lambda scn, mode, o: f"RMSNorm({o}) · γ_O"),
)


def extend(stages: list[Stage], scn: Scenario) -> None:
    """Q̂ and K̂ between Q, K and their rotation; Ô between O and the residual; E_sum scaled."""
    q_hat, k_hat, o_post = STAGES
    insert_before(stages, "Q_rot", q_hat)
    insert_before(stages, "K_rot", k_hat)
    reroute(stages, "Q", "Q_hat", readers=("Q_rot",))
    reroute(stages, "K", "K_hat", readers=("K_rot",))
    insert_after(stages, "O", o_post)
    reroute(stages, "O", "O_post", readers=("R",))
    replace(stages, "E_sum", compute=_scaled, formula_for=lambda base, scn, mode, stage: "E_sum = E · √d_model",
            worked=scaled_cell)
    if get(stages, "R").reads[-1] != "O_post":
        raise AssertionError("the residual reads the normalised output")
