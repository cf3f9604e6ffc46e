"""The base layer: one head of scaled dot-product attention over one sequence, as the lessons write it.

    x = e + p;  q = x · W_Q,  k = x · W_K,  v = x · W_V;  s = q · kᵀ / √d_k;  a = softmax(s + m);  z = a · V

Each Stage says what it reads (graph.py) and how it is computed from those inputs, its formula
($0 is the symbol of its first input, $1 of its second: Q = $0 · W_Q reads Q = X · W_Q, or LN(X)
where a norm stands between), its text variants and notes, and how one of its cells is worked out
(cells.py). A scenario's features (attnwalk/features/) add stages and reroute what these read:
RoPE puts Q_rot and K_rot between Q, K and QKᵀ; ALiBi adds B and S + B before A; a norm puts
LN(X) between X and the projections.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attnwalk.layer import cells, gradcells, ops
from attnwalk.layer.decodemath import group
from attnwalk.layer.graph import (MASKED, SIGNED, TOKENS, WEIGHTS, Backward, Graph, Stage,  # noqa: F401
                                 fixed_terms, get, grouped, symbol_of)
from attnwalk.layer.modes import BASELINE

if TYPE_CHECKING:
    from attnwalk.layer.graph import Context
    from attnwalk.layer.modes import Mode
    from attnwalk.scenario.scenario import Scenario


# -- how each stage is computed --------------------------------------------------------------------


def embeddings(ctx: Context) -> np.ndarray:
    return np.array(ctx.scn.main.E[ctx.here], dtype=np.float64)  # (n, d_model): the rows looked up


def positions(ctx: Context) -> np.ndarray:
    """P of the main sequence at the rows computed: sinusoidal, given, or zeros."""
    seq = ctx.scn.main
    if seq.positional == "sinusoidal":
        return ops.sinusoidal(ctx.here, seq.d_model)  # (n, d_model)
    if seq.positional == "explicit":
        return np.array(seq.P_given[ctx.here], dtype=np.float64)
    return np.zeros((len(ctx.here), seq.d_model))  # none; RoPE turns q and k instead


def projection(ctx: Context, X: np.ndarray, W: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    out = ops.product(X, W)  # (n, d_model) @ (d_model, h·d) -> (n, h·d)
    return out if b is None else out + b  # a real model's bias: (h·d,), added to every row


def dot_scores(ctx: Context, Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    return Q @ K.T  # (n, d_k) @ (d_k, m) -> (n, m), this head's


def scaled(ctx: Context, QKT: np.ndarray) -> np.ndarray:
    return QKT / ctx.scale  # (n, m): √d_k, or 1 where the mode or the score kind says so


def weights(ctx: Context, S: np.ndarray) -> np.ndarray:
    return ctx.mode.weights(ctx.seen(S), ctx.allowed)  # (n, m), rows sum to 1


def output(ctx: Context, A: np.ndarray, V: np.ndarray) -> np.ndarray:
    return A @ V  # (n, m) @ (m, d_v) -> (n, d_v)


def concatenated(ctx: Context, Z: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(Z, axis=1)  # h × (n, d_v) -> (n, h·d_v)


# -- how each stage passes a gradient back (graph.Backward): dOut is ∂L/∂ of its output ----------


def sum_grad(ctx: Context, dX: np.ndarray, X: np.ndarray, E: np.ndarray, P: np.ndarray) -> tuple:
    return dX, None  # X = E + P: E's rows get ∂L/∂X; P is a fixed table (or 0), never learned


def product_grad(ctx: Context, dP: np.ndarray, P: np.ndarray, L: np.ndarray, R: np.ndarray,
                 b: np.ndarray | None = None) -> tuple:
    """P = L · R (+ b): Q = X · W_Q, Z = A · V, O = concat · W_O."""
    dL = dP @ R.T  # (n, h·d) @ (h·d, d_model) -> (n, d_model);  Z: (n, d_v) @ (d_v, m) -> (n, m)
    dR = L.T @ dP  # (d_model, n) @ (n, h·d) -> (d_model, h·d);  Z: (m, n) @ (n, d_v) -> (m, d_v)
    return (dL, dR) if b is None else (dL, dR, dP.sum(axis=0))  # b is added to every row


def dot_scores_grad(ctx: Context, dS: np.ndarray, QKT: np.ndarray, Q: np.ndarray, K: np.ndarray) -> tuple:
    return dS @ K, dS.T @ Q  # (n, m) @ (m, d_k) -> (n, d_k);  (m, n) @ (n, d_k) -> (m, d_k)


def scaled_grad(ctx: Context, dS: np.ndarray, S: np.ndarray, QKT: np.ndarray) -> tuple:
    return (dS / ctx.scale,)


def weights_grad(ctx: Context, dA: np.ndarray, A: np.ndarray, S: np.ndarray) -> tuple:
    """The softmax's Jacobian applied row by row: ∂L/∂S = A ⊙ (∂L/∂A − rowsum(A ⊙ ∂L/∂A)), × --amplify.
    A masked weight is exactly 0 whatever its score, so its cell is exactly 0 (written as 0.0,
    never −0.0). Uniform (and hard) weights do not move with the scores: no gradient."""
    if not ctx.mode.smooth:
        return (None,)
    inner = np.sum(A * dA, axis=-1, keepdims=True)  # (n, 1): the row's A-weighted mean of ∂L/∂A
    dS = A * (dA - inner) * ctx.amplify  # (n, m)
    return (np.where(ctx.allowed, dS, 0.0),)


def concat_grad(ctx: Context, dC: np.ndarray, C: np.ndarray, Z: list[np.ndarray]) -> tuple:
    from attnwalk.layer.graph import block

    return ([block(dC, h, len(Z)) for h in range(len(Z))],)  # each head's columns back to its Z


def _s_terms(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    return ("{d} / √d_k",) if mode.scales(scn.scorer) else ("{d}",)


def _a_terms(scn: Scenario, mode: Mode) -> tuple[str | None, ...]:
    return ("{out} ⊙ ({d} − rowsum({out} ⊙ {d}))",) if mode.smooth else (None,)


SUM_BACK = Backward(sum_grad, fixed_terms("{d}", None), gradcells.passed)
PRODUCT_BACK = Backward(product_grad, fixed_terms("{d} · {1}ᵀ", "{0}ᵀ · {d}", "Σ_i {d}[i, :]"), gradcells.product)


# -- formulas, text variants and notes -------------------------------------------------------------


def _p_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    if scn.main.positional in ("none", "rope"):  # RoPE adds nothing to X: it turns q and k later
        return "P = 0"
    if scn.main.positional == "explicit":
        return "P ∈ ℝ^(n × d_model)"  # the scenario gives the rows
    return base


def order_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    """P's and X's text: which positions there are. Without positions and without a mask the layer
    is permutation-equivariant; the features that carry order another way (a mask, ALiBi, a
    model's learned table) add their variants in front (features/)."""
    positional = scn.main.positional  # none | sinusoidal | explicit | rope
    return () if positional == "sinusoidal" else (positional,)


def _id_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    return () if scn.main.ids is not None else ("no_ids",)  # ids and the lookup only where ids are


def _embedding_notes(scn: Scenario, mode: Mode) -> list[str]:
    E = np.asarray(scn.main.E) * 100  # typed by hand: at most two decimals (random ones have more)
    return ["truth.hand_set"] if bool(np.all(np.abs(E - np.round(E)) < 1e-9)) else []


def score_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    """q_i · k_j, in the names of what QKᵀ compares (q_rot, k_rot where RoPE turns them first)."""
    return f"QKᵀ[i, j] = {cells.vector_name(stage.reads[0])}_i · {cells.vector_name(stage.keys[0])}_j"


def _s_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    return base if mode.scales(scn.scorer) else "S = QKᵀ"


def _s_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    undivided = () if scn.scorer.divides else (scn.score,)  # additive: never divided by √d_k
    if not mode.reads_scores or not mode.smooth:  # S computed as usual, then ignored or only ranked
        return (mode.name, *undivided)
    return undivided or (() if mode.divides else (mode.name,))


def mode_notes(scn: Scenario, mode: Mode) -> list[str]:
    return [] if mode == BASELINE else [f"mode.{mode.name}.explain"]


def _a_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    if not mode.reads_scores:
        if not scn.masked:  # every key allowed: 1 / (number of keys)
            return "A[i, j] = 1 / n"
        return "A[i, :] = softmax(M[i, :]) = exp(M[i, :]) / |{k : M[i, k] = 0}|"
    if not mode.smooth:
        return f"A[i, :] = onehot(argmax_k ({symbol_of(stage.reads[0], scn)} + M)[i, k])"
    return base


def mode_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    return () if mode.smooth else (mode.name,)  # uniform, hard (A's and Z's text)


def _output_notes(scn: Scenario, mode: Mode) -> list[str]:
    # From QKᵀ to Z nothing is learned in any mode; W_O, additive scores (w_a), QK-norm's scale and
    # a real model's parameters say more (their features change this note)
    return ["truth.no_parameters"]


def blocks(symbol: str, heads: int) -> str:
    """"[Q_1 | Q_2 | Q_3]", or "[Q_1 | Q_2 | … | Q_8]" for many heads: one block per head."""
    shown = [f"{symbol}_{h}" for h in range(1, heads + 1)]
    if heads > 3:
        shown = shown[:2] + ["…", shown[-1]]
    return "[" + " | ".join(shown) + "]"


def projection_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    """"Q = X · W_Q" from what the stage reads and is made with (+ b_Q where a model adds a bias),
    then its heads' blocks: K and V have one block per K/V head."""
    text = f"{stage.symbol} = {grouped(symbol_of(stage.reads[0], scn))} · " + " + ".join(stage.params)
    count = scn.groups if stage.shared else scn.heads if stage.split else 1
    return text + (f" = {blocks(stage.symbol, count)}" if count > 1 else "")


# -- a stage's row t as decoding computes it (layer/decodemath.py): from its reads' rows ---------


def _x_step(scn: Scenario, mode: Mode, e: str, p: str) -> str:
    return "e_t" if scn.main.positional in ("none", "rope") else "e_t + p_t"


def projection_step(weight: str):
    return lambda scn, mode, x: f"{x} · {weight}"


def _s_step(scn: Scenario, mode: Mode, scores: str) -> str:
    return f"{group(scores)} / √d_k" if mode.scales(scn.scorer) else scores


def _a_step(scn: Scenario, mode: Mode, s: str) -> str:
    if not mode.reads_scores:
        return "1 / |{j : M[t, j] = 0}|"
    return f"onehot(argmax_j {s})" if not mode.smooth else f"softmax_j({s})"


_SINUSOIDAL = "P[pos, 2i] = sin(pos/10000^(2i/d_model)), P[pos, 2i+1] = cos(…)"
_BIG = "use smaller embeddings or weights"

BASE: Graph = (
    Stage("tokens", "tokens", "token_i → id_i", "n", "-", None, kind=TOKENS, variants=_id_variants),
    Stage("E", "E", "E = EmbeddingTable[ids]", "n", "d_model", embeddings, field="embeddings",
          variants=_id_variants, notes=_embedding_notes, worked=cells.embedding),
    Stage("P", "P", _SINUSOIDAL, "n", "d_model", positions, field="positional", formula_for=_p_formula,
          variants=order_variants, worked=cells.position),
    Stage("X", "X", "X = $0 + $1", "n", "d_model", lambda ctx, E, P: E + P, reads=("E", "P"),
          variants=order_variants, worked=cells.input_sum, overflow="use smaller embeddings or positions",
          step=_x_step, backward=SUM_BACK),
    Stage("Q", "Q", "Q = $0 · W_Q", "n", "d_k", projection, reads=("X",), params=("W_Q",), split=True,
          weight="W_Q", formula_for=projection_formula, step=projection_step("W_Q"),
          worked=cells.projection, overflow=_BIG, backward=PRODUCT_BACK),
    Stage("K", "K", "K = $0 · W_K", "m", "d_k", projection, reads=("X",), params=("W_K",), split=True, shared=True,
          weight="W_K", formula_for=projection_formula, step=projection_step("W_K"), worked=cells.projection,
          overflow=_BIG, backward=PRODUCT_BACK),
    Stage("V", "V", "V = $0 · W_V", "m", "d_v", projection, reads=("X",), params=("W_V",), split=True, shared=True,
          weight="W_V", formula_for=projection_formula, step=projection_step("W_V"), worked=cells.projection,
          overflow=_BIG, backward=PRODUCT_BACK),
    Stage("QK^T", "QKᵀ", "QKᵀ[i, j] = q_i · k_j", "n", "m", dot_scores, reads=("Q",), keys=("K",),
          per_head=True, formula_for=score_formula, notes=lambda scn, mode: ["truth.cost"],
          worked=cells.scores, step=lambda scn, mode, q: f"{q} · k_j",
          overflow="use smaller queries and keys", aliases=("qkt", "qk^t", "qk", "raw"),
          backward=Backward(dot_scores_grad, fixed_terms("{d} · {1}", "{d}ᵀ · {0}"), gradcells.dot_scores)),
    Stage("S", "S", "S = QKᵀ / √d_k", "n", "m", scaled, reads=("QK^T",), per_head=True,
          formula_for=_s_formula, variants=_s_variants, notes=mode_notes, worked=cells.scaled, step=_s_step,
          panel="cost",  # the direct form's cost, the layer's, beside the first head's S
          backward=Backward(scaled_grad, _s_terms, gradcells.scaled)),
    Stage("A", "A", "A[i, :] = softmax(($0 + M)[i, :])", "n", "m", weights, reads=("S",), kind=WEIGHTS,
          per_head=True, formula_for=_a_formula, variants=mode_variants, notes=mode_notes,
          worked=cells.softmax, step=_a_step, backward=Backward(weights_grad, _a_terms, gradcells.softmax)),
    Stage("Z", "Z", "Z = A · V", "n", "d_v", output, reads=("A",), keys=("V",), per_head=True,
          variants=mode_variants, notes=_output_notes, worked=cells.output, overflow="use smaller values",
          step=lambda scn, mode, a: f"{a} · V_cache", backward=PRODUCT_BACK),
    # every head's Z side by side: one head's Z itself, so not shown (features/heads.py shows it)
    Stage("concat", "concat", "concat = [Z_1 | Z_2 | … | Z_h]", "n", "h·d_v", concatenated, reads=("Z",),
          split=True, across=True, shown=False, worked=cells.concat,
          backward=Backward(concat_grad, fixed_terms("{d}[:, h]"), gradcells.concat)),
)


def stage_named(key: str, stages: Graph | None = None) -> Stage:
    """The stage whose key is `key` (KeyError when there is none): of `stages`, else of the base."""
    return get(BASE if stages is None else stages, key)


def typed_name(stage: Stage) -> str:
    """How a person types `stage` (explain's choices, g in the walk): its symbol where that is plain
    ASCII (H, Y, p), else its key (QK^T, S+M, LN); a later block's as block 1's with ".b" (H.2)."""
    import re

    from attnwalk.numbering import shown

    base = re.sub(r"^\((.*)\)(⁽[⁰¹²³⁴⁵⁶⁷⁸⁹]+⁾)$|(⁽[⁰¹²³⁴⁵⁶⁷⁸⁹]+⁾)$", r"\1", stage.symbol) if stage.base else stage.symbol
    key = stage.base or stage.key
    name = base if base.isascii() and re.fullmatch(r"[A-Za-z]\w*", base) else key
    return f"{name}.{shown(stage.block)}" if stage.base else name


def stage_by_name(name: str, stages: Graph | None = None) -> Stage | None:
    """The stage a user means by `name` (key, symbol or a common spelling, any case), or None."""
    stages = BASE if stages is None else stages
    for stage in stages:  # a key as written first: p (the next-token probabilities) is not P
        if name == stage.key:
            return stage
    folded = name.strip().lower().replace(" ", "")
    for stage in stages:
        if name == stage.key or folded in (stage.key.lower(), stage.symbol.lower().replace(" ", ""),
                                           *stage.aliases):
            return stage
    return None
