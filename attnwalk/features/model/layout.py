"""What a real layer's own stages are made of, by family: where its input norm reads from, what the
residual adds to, its norms' parameters, and the formulas and text variants that say so.

A model's scenario carries its `models.data.ModelLayer` as the setting "model"; these functions
read only its arrays and facts (duck-typed: the features import neither the models package nor
text). BERT normalises after the residual sum, GPT-2 before attention, the Llama family with an
RMSNorm.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from attnwalk.layer import norms

if TYPE_CHECKING:
    from attnwalk.layer.graph import Stage
    from attnwalk.layer.modes import Mode
    from attnwalk.scenario.scenario import Scenario

NAME = "model"
HAT = "\u0302"  # Q̂, K̂, Ô: normalised


def layer_of(scn: Scenario) -> Any:
    """The models.data.ModelLayer the scenario was made from."""
    return scn.setting(NAME)


def has_segments(scn: Scenario) -> bool:
    return layer_of(scn).E_seg is not None


def fairseq_positions(scn: Scenario) -> bool:
    """RoBERTa and XLM-R (BERT's layout, another model_type): positions numbered from the padding
    id + 1, and a token-type table of one row, BERT's segments without a segment B."""
    info = layer_of(scn).info
    return info.family == "bert" and info.model_type != "bert"


def later_layer(scn: Scenario) -> bool:
    """A layer after the first: its input H was made by the layers before it."""
    return layer_of(scn).layer > 0


def rms(scn: Scenario) -> bool:
    """The Llama family's input norm: RMSNorm, x / RMS(x) · γ (no mean subtracted, no β)."""
    return layer_of(scn).norm_in.kind == "rmsnorm"


def post_norm(scn: Scenario) -> bool:
    """BERT's layout: LayerNorm after the residual sum (GPT-2 normalises before attention)."""
    return layer_of(scn).norm_after is not None


def norm_input(scn: Scenario) -> str:
    """The stage the norm before attention reads: H in a later layer, else E_sum."""
    return "H" if later_layer(scn) else "E_sum"


def residual_input(scn: Scenario) -> str:
    """What O is added to: BERT adds it to X (the attention's own input, already normalised);
    GPT-2 to the stream before ln_1 (E_sum in the first layer, H after it)."""
    return "X" if post_norm(scn) else norm_input(scn)


class LayerNormParams(NamedTuple):
    gamma: np.ndarray  # (d_model,)
    beta: np.ndarray  # (d_model,)
    eps: float


def norm_before(scn: Scenario) -> LayerNormParams:
    norm = layer_of(scn).norm_in
    return LayerNormParams(norm.gamma, norm.beta, float(norm.eps))


def norm_after(scn: Scenario) -> LayerNormParams:
    gamma, beta, eps = layer_of(scn).norm_after
    return LayerNormParams(gamma, beta, float(eps))


stats = norms.stats  # each row's μ and σ, as the cells recompute them


# -- formulas and text variants --------------------------------------------------------------------


def family(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    """A model stage's text in its family's words: "bert", "gpt2", "llama"; Gemma 3's, then Llama's."""
    if layer_of(scn) is None:
        return ()
    family_ = layer_of(scn).info.family
    return ("gemma3", "llama") if family_ == "gemma3" else (family_,)  # Gemma: Llama's words where it has none


def sum_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    if layer_of(scn) is None:  # asked of a scenario without the stage: the definition's own
        return base
    if rms(scn):  # the Llama family adds no position vector (RoPE turns q and k instead)
        return "E_sum = E"
    return "E_sum = E + P + E_seg" if has_segments(scn) else "E_sum = E + P"


def earlier_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    if layer_of(scn) is None or not later_layer(scn):  # asked of a layer without the stage: the definition's own
        return base
    before = layer_of(scn).layer  # the layer before this one, counted from 1
    if post_norm(scn):  # BERT: that layer's Y and its feed-forward output, before its last LayerNorm
        return f"H = Y_{before} + FFN(Y_{before})"
    if layer_of(scn).info.family == "gemma3":  # its residual sum, then the GELU-gated MLP between two norms
        return f"H = R_{before} + RMSNorm₄(GeGLU(RMSNorm₃(R_{before})))"
    if rms(scn):  # Llama: post_attention_layernorm (an RMSNorm), then the SwiGLU feed-forward
        return f"H = R_{before} + SwiGLU(RMSNorm₂(R_{before}))"
    return f"H = R_{before} + MLP(ln_2(R_{before}))"  # GPT-2: its residual sum, then its MLP's output


def stats_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    if layer_of(scn) is None:  # asked of a scenario without the stage: the definition's own
        return base
    x = norm_input(scn)
    return f"μ = mean({x}[i, :]),  σ = √(var({x}[i, :]) + ε),  ε = {norm_before(scn).eps:g}"


def rms_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    if layer_of(scn) is None or not rms(scn):  # asked of a layer without the stage: the definition's own
        return base
    x = norm_input(scn)
    return f"RMS = √(mean({x}[i, :]²) + ε),  ε = {norm_before(scn).eps:g}"


def input_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    if layer_of(scn) is None:  # asked of a scenario without the stage: the definition's own
        return base
    x = norm_input(scn)
    if rms(scn):
        return f"X = RMSNorm({x}) = {x} / RMS · γ"
    return f"X = LN({x}) = ({x} − μ) / σ · γ + β"


def residual_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    if layer_of(scn) is None:  # asked of a scenario without the stage: the definition's own
        return base
    normed = getattr(layer_of(scn), "post_norm", None) is not None  # Gemma 3 adds its norm of O, Ô
    return f"R = {residual_input(scn)} + {'O' + HAT if normed else 'O'}"


def after_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    if layer_of(scn) is None or not post_norm(scn):  # asked of a layer without the stage: the definition's own
        return base
    return f"Y = LN(R) = (R − μ_R) / σ_R · γ₂ + β₂,  ε = {norm_after(scn).eps:g}"


def position_formula(text: str, scn: Scenario, mode: Mode) -> str:
    if scn.main.positional != "explicit":  # RoPE: P = 0, as the base says
        return text
    return "P = W_pos[pos_ids]" if fairseq_positions(scn) else "P = W_pos[0 … n−1]"
