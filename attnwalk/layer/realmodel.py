"""The stages a real pretrained layer adds (`attnwalk model`): how each is computed, its formula
and its text variants, read by the Stage entries in stages.py.

A model's scenario carries its `models.data.ModelLayer` as `scn.model`; these functions read
only its arrays and facts (duck-typed: the core imports neither the models package nor text).
Everything the walk can compute from the stages before it is recomputed here, so a worked cell
and its table agree: E_sum = E + P (+ E_seg), the LayerNorm's μ and σ, X = (x − μ)/σ · γ + β
(the Llama family: the RMSNorm's RMS and X = x / RMS · γ), the residual and BERT's second
LayerNorm. Only H, the stream the earlier layers made, is taken as the model computed it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attnwalk.layer.scores import raw_scores

if TYPE_CHECKING:
    from attnwalk.layer.modes import Mode
    from attnwalk.layer.walk import Layer
    from attnwalk.scenario.model import Scenario

Mats = dict  # the matrices computed so far, as in stages.py


def is_model(scn: Scenario) -> bool:
    return getattr(scn, "model", None) is not None


def has_segments(scn: Scenario) -> bool:
    return is_model(scn) and scn.model.E_seg is not None


def fairseq_positions(scn: Scenario) -> bool:
    """RoBERTa and XLM-R (BERT's layout, another model_type): positions numbered from the padding
    id + 1, and a token-type table of one row, BERT's segments without a segment B."""
    return is_model(scn) and scn.model.info.family == "bert" and scn.model.info.model_type != "bert"


def segment_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    return ("one_type",) if fairseq_positions(scn) else ()


def later_layer(scn: Scenario) -> bool:
    """A layer after the first: its input H was made by the layers before it."""
    return is_model(scn) and scn.model.layer > 0


def rms(scn: Scenario) -> bool:
    """The Llama family's input norm: RMSNorm, x / RMS(x) · γ (no mean subtracted, no β)."""
    return is_model(scn) and scn.model.norm_in.kind == "rmsnorm"


def layer_norm_before(scn: Scenario) -> bool:
    """BERT's and GPT-2's: a LayerNorm with its mean and σ before attention."""
    return is_model(scn) and not rms(scn)


def post_norm(scn: Scenario) -> bool:
    """BERT's layout: LayerNorm after the residual sum (GPT-2 normalises before attention)."""
    return is_model(scn) and scn.model.norm_after is not None


def norm_input(scn: Scenario) -> str:
    """The stage the LayerNorm before attention reads: H in a later layer, else E_sum."""
    return "H" if later_layer(scn) else "E_sum"


def residual_input(scn: Scenario) -> str:
    """What O is added to: BERT adds it to X (the attention's own input, already normalised);
    GPT-2 to the stream before ln_1 (E_sum in the first layer, H after it)."""
    return "X" if post_norm(scn) else norm_input(scn)


# -- computations ----------------------------------------------------------------------------------


def segments(m: Mats, layer: Layer) -> np.ndarray:
    return np.array(layer.scn.model.E_seg, dtype=np.float64)  # (n, d_model): segment 0's row, n times


def embedding_sum(m: Mats, layer: Layer) -> np.ndarray:
    total = m["E"] + m["P"]  # (n, d_model)
    return total + m["E_seg"] if "E_seg" in m else total


def earlier(m: Mats, layer: Layer) -> np.ndarray:
    return np.array(layer.scn.model.norm_in.x, dtype=np.float64)  # (n, d_model) as the model made it


class LayerNormParams(NamedTuple):
    gamma: np.ndarray  # (d_model,)
    beta: np.ndarray  # (d_model,)
    eps: float


def norm_before(scn: Scenario) -> LayerNormParams:
    norm = scn.model.norm_in
    return LayerNormParams(norm.gamma, norm.beta, float(norm.eps))


def norm_after(scn: Scenario) -> LayerNormParams:
    gamma, beta, eps = scn.model.norm_after
    return LayerNormParams(gamma, beta, float(eps))


def stats(x: np.ndarray, eps: float) -> np.ndarray:
    """Each row's mean μ and σ = √(var + ε), the population variance as LayerNorm takes it."""
    mu = x.mean(axis=1)  # (n,)
    sigma = np.sqrt(((x - mu[:, None]) ** 2).mean(axis=1) + eps)  # (n,)
    return np.stack([mu, sigma], axis=1)  # (n, 2)


def norm_stats(m: Mats, layer: Layer) -> np.ndarray:
    return stats(m[norm_input(layer.scn)], norm_before(layer.scn).eps)


def normalized(x: np.ndarray, mu_sigma: np.ndarray, params: LayerNormParams) -> np.ndarray:
    """(x − μ) / σ · γ + β, row by row."""
    return (x - mu_sigma[:, :1]) / mu_sigma[:, 1:] * params.gamma + params.beta  # (n, d_model)


def rms_stats(m: Mats, layer: Layer) -> np.ndarray:
    """Each row's RMS = √(mean(x²) + ε): (n, 1). RMSNorm divides by it, with no mean subtracted."""
    x = m[norm_input(layer.scn)]  # (n, d_model)
    return np.sqrt((x ** 2).mean(axis=1, keepdims=True) + norm_before(layer.scn).eps)


def layer_input(m: Mats, layer: Layer) -> np.ndarray:
    """X for a model: the LayerNorm (or RMSNorm) of E_sum or H (what W_Q multiplies)."""
    x = m[norm_input(layer.scn)]
    if rms(layer.scn):
        return x / m["RMS"] * norm_before(layer.scn).gamma  # (n, d_model) / (n, 1) * (d_model,)
    return normalized(x, m["LN_stats"], norm_before(layer.scn))


def residual(m: Mats, layer: Layer) -> np.ndarray:
    return m[residual_input(layer.scn)] + m["O"]  # (n, d_model)


def after_norm(m: Mats, layer: Layer) -> np.ndarray:
    params = norm_after(layer.scn)
    return normalized(m["R"], stats(m["R"], params.eps), params)


def head_weights(m: Mats, layer: Layer, head: int) -> np.ndarray:
    """Head `head`'s A as the walk computes it, from its blocks of Q and K (the same functions the
    per-head stages use: raw scores, the mode's divisor, the mask, the mode's weights)."""
    scn = layer.scn
    d_k, kv = scn.d_k, scn.kv_head(head)  # grouped-query: the K/V head this query head reads
    Q = m["Q"][:, head * d_k:(head + 1) * d_k]  # (n, d_k)
    K = m["K"][:, kv * d_k:(kv + 1) * d_k]  # (m, d_k)
    if scn.rope is not None:  # the Llama family: the rotated queries and keys are compared
        Q, K = scn.rope.turn(Q, np.arange(len(Q))), scn.rope.turn(K, np.arange(len(K)))
    S = raw_scores(scn, Q, K) / layer.scale  # (n, m)
    return layer.mode.weights(layer.seen_scores({"S": S}), scn.allowed)


def glance(m: Mats, layer: Layer) -> np.ndarray:
    """Every head's entropy per query, in bits: (n, h). The screen adds each head's map."""
    from attnwalk.layer.ops import entropy_bits

    return np.stack([entropy_bits(head_weights(m, layer, h)) for h in range(layer.scn.heads)], axis=1)


# -- where a head looks most -----------------------------------------------------------------------

# What a query's top key is, relative to the query: the labels the all-heads screen names.
SPECIAL, ITSELF, PREVIOUS, NEXT, FIRST, TOKEN = "special", "itself", "previous", "next", "first", "token"
TIE = "tie"  # no one key: the row's top weight is shared (uniform mode gives every row one)


class Focus(NamedTuple):
    """Where one head looks most: the kind of key most queries' top weight falls on, the key
    itself when the kind is one token (SPECIAL, FIRST or TOKEN), and how many queries do so."""

    kind: str
    key: int | None  # the key's index for SPECIAL, FIRST and TOKEN
    count: int  # queries whose top key is of this kind (and this key)
    of: int  # queries in all


def top_kind(i: int, j: int, special: tuple[bool, ...]) -> tuple[str, int | None]:
    """What query i's top key j is: a special token, itself, its neighbour, the first token, or
    another token. A special token is named first ([CLS], [SEP] are where idle heads park)."""
    if special[j]:
        return SPECIAL, j
    if j == i:
        return ITSELF, None
    if j == i - 1:
        return PREVIOUS, None
    if j == i + 1:
        return NEXT, None
    if j == 0:
        return FIRST, 0
    return TOKEN, j


def looks_most_at(A: np.ndarray, special: tuple[bool, ...]) -> Focus:
    """The commonest kind of top key over the query rows of A (n, n), a row whose top weight
    several keys share counting as TIE; a tie between kinds goes to the kind named first in
    top_kind's order, then to the earlier key."""
    from attnwalk.layer.ops import row_maxima

    tops = row_maxima(A)  # (n, n) True at each row's largest weight, at each of tied ones
    counts: dict[tuple[str, int | None], int] = {}
    for i, row in enumerate(A):
        kind = top_kind(i, int(np.argmax(row)), special) if tops[i].sum() == 1 else (TIE, None)
        counts[kind] = counts.get(kind, 0) + 1
    order = (SPECIAL, ITSELF, PREVIOUS, NEXT, FIRST, TOKEN, TIE)
    (kind, key), count = max(counts.items(),
                             key=lambda item: (item[1], -order.index(item[0][0]), -(item[0][1] or 0)))
    return Focus(kind, key, count, len(A))


# -- formulas and text variants --------------------------------------------------------------------


def family_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    """A model stage's text in its family's words: "bert", "gpt2" or "llama" (BERT normalises after
    the residual sum, GPT-2 before attention, the Llama family with an RMSNorm), then the stage's own."""
    return (scn.model.info.family,) if is_model(scn) else ()


def sum_formula(base: str, scn: Scenario, mode: Mode) -> str:
    if not is_model(scn):  # a formula is asked of every stage, applying or not
        return base
    if rms(scn):  # the Llama family adds no position vector (RoPE turns q and k instead)
        return "E_sum = E"
    return "E_sum = E + P + E_seg" if has_segments(scn) else "E_sum = E + P"


def earlier_formula(base: str, scn: Scenario, mode: Mode) -> str:
    if not later_layer(scn):
        return base
    before = scn.model.layer  # the layer before this one, counted from 1
    if post_norm(scn):  # BERT: that layer's Y and its feed-forward output, before its last LayerNorm
        return f"H = Y_{before} + FFN(Y_{before})"
    if rms(scn):  # Llama: post_attention_layernorm (an RMSNorm), then the SwiGLU feed-forward
        return f"H = R_{before} + SwiGLU(RMSNorm₂(R_{before}))"
    return f"H = R_{before} + MLP(ln_2(R_{before}))"  # GPT-2: its residual sum, then its MLP's output


def stats_formula(base: str, scn: Scenario, mode: Mode) -> str:
    if not is_model(scn):
        return base
    x = norm_input(scn)
    return f"μ = mean({x}[i, :]),  σ = √(var({x}[i, :]) + ε),  ε = {norm_before(scn).eps:g}"


def rms_formula(base: str, scn: Scenario, mode: Mode) -> str:
    if not rms(scn):
        return base
    x = norm_input(scn)
    return f"RMS = √(mean({x}[i, :]²) + ε),  ε = {norm_before(scn).eps:g}"


def input_formula(base: str, scn: Scenario, mode: Mode) -> str:
    if not is_model(scn):
        return base
    if rms(scn):
        return f"X = RMSNorm({norm_input(scn)}) = {norm_input(scn)} / RMS · γ"
    return f"X = LN({norm_input(scn)}) = ({norm_input(scn)} − μ) / σ · γ + β"


def residual_formula(base: str, scn: Scenario, mode: Mode) -> str:
    if not is_model(scn):
        return base
    return f"R = {residual_input(scn)} + O"


def after_formula(base: str, scn: Scenario, mode: Mode) -> str:
    if not post_norm(scn):
        return base
    return f"Y = LN(R) = (R − μ_R) / σ_R · γ₂ + β₂,  ε = {norm_after(scn).eps:g}"
