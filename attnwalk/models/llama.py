"""The Llama family (llama, qwen2, mistral): token embeddings only, no positions added; each
layer RMSNorm, attention with rotary positions on Q and K, grouped-query heads (num_key_value_heads
K/V heads, each shared by H/G query heads), Q/K/V biases where the model has them (Qwen2), o_proj,
the residual; then RMSNorm, the SwiGLU feed-forward and its residual. Linear weights are stored
out × in and are transposed here."""

from __future__ import annotations

import math

import numpy as np

from attnwalk.layer.rope import frequencies
from attnwalk.models.blocks import Attention, gated, rms_norm, silu
from attnwalk.models.config import Config
from attnwalk.models.data import Mlp, ModelError, Norm, Rope
from attnwalk.models.weights import Weights

ANCHOR = "embed_tokens.weight"


class Llama:
    """The state between layers is the residual stream."""

    def __init__(self, weights: Weights, cfg: Config) -> None:
        self.w, self.cfg = weights, cfg

    def embed(self, ids: list[int]) -> tuple[np.ndarray, None, None, np.ndarray]:
        cfg = self.cfg
        if cfg.sliding_window is not None and cfg.model_type != "mistral" and len(ids) > cfg.sliding_window:
            # Qwen2's use_sliding_window applies only from max_window_layers on: not computed
            raise ModelError(f"the sentence is {len(ids)} tokens, longer than the model's sliding "
                             f"window of {cfg.sliding_window}: shorten it ({cfg.model_type}'s per-layer "
                             "window is not computed)")
        E_tok = self.w.rows(ANCHOR, (cfg.vocab_size, cfg.d_model), "vocab_size × hidden_size", ids)
        return E_tok, None, None, E_tok

    def rope(self, n: int) -> Rope:
        cfg = self.cfg
        if cfg.d_head % 2:
            raise ModelError(f"head_dim {cfg.d_head} is odd: rotary positions turn pairs of dimensions")
        scaling = cfg.rope["scaling"]
        freqs = frequencies(cfg.d_head, cfg.rope["theta"])
        if scaling is not None:
            freqs = llama3_frequencies(freqs, **scaling)
        factors = cfg.rope.get("factors")  # a GGUF's rope_freqs.weight: Llama 3.1's, precomputed
        if factors is not None:
            freqs = freqs / np.asarray(factors)
        return Rope(theta=cfg.rope["theta"], freqs=freqs, positions=np.arange(n, dtype=np.float64),
                    scaling=None if scaling is None and factors is None else "llama3")

    def start(self, E_sum: np.ndarray) -> np.ndarray:
        return E_sum

    def layer(self, l: int, h: np.ndarray) -> dict:
        cfg, p = self.cfg, f"layers.{l}."
        d, q_width, kv_width = cfg.d_model, cfg.n_heads * cfg.d_head, cfg.n_kv_heads * cfg.d_head
        norm = self._norm(p + "input_layernorm", h)
        fields = {"norm_in": norm, "X": norm.y, "causal": True, "residual": h, "norm_after": None,
                  # Mistral's window, in every layer (a sentence within it sees as the causal mask)
                  "window": cfg.sliding_window if cfg.model_type == "mistral" else None}
        for key, width in (("Q", q_width), ("K", kv_width), ("V", kv_width)):
            name = p + f"self_attn.{key.lower()}_proj"
            fields[f"W_{key}"] = self._linear(name, d, width)
            fields[f"b_{key}"] = self._bias(name, width) if cfg.qkv_bias else None
        fields["W_O"] = self._linear(p + "self_attn.o_proj", q_width, d)
        fields["b_O"] = self._bias(p + "self_attn.o_proj", d) if cfg.out_bias else None
        return fields

    def finish(self, l: int, attention: Attention) -> np.ndarray:
        return self.mlp(l, attention).Y

    def mlp(self, l: int, attention: Attention) -> Mlp:
        """post_attention_layernorm, the SwiGLU feed-forward and its residual, every piece kept."""
        cfg, p = self.cfg, f"layers.{l}.mlp."
        a = attention.after  # residual + attention output
        norm = self._norm(f"layers.{l}.post_attention_layernorm", a)
        W_gate = self._linear(p + "gate_proj", cfg.d_model, cfg.d_ff)
        W_1 = self._linear(p + "up_proj", cfg.d_model, cfg.d_ff)
        W_2 = self._linear(p + "down_proj", cfg.d_ff, cfg.d_model)
        gate, U, G, F = gated(norm.y, W_gate, W_1, W_2, silu)
        return Mlp("swiglu", cfg.activation, a, norm, W_1, None, W_gate, W_2, None, U, gate, G, F, None, a + F)

    def _linear(self, name: str, d_in: int, d_out: int) -> np.ndarray:
        return self.w.get(name + ".weight", (d_out, d_in), f"{d_out} outputs × {d_in} inputs").T

    def _bias(self, name: str, d_out: int) -> np.ndarray:
        return self.w.get(name + ".bias", (d_out,), f"{d_out} outputs")

    def _norm(self, name: str, x: np.ndarray) -> Norm:
        return rms_norm(x, self.w.get(name + ".weight", (self.cfg.d_model,), "hidden_size"), self.cfg.eps)


def llama3_frequencies(freqs: np.ndarray, factor: float, low_freq_factor: float,
                       high_freq_factor: float, original_max_position_embeddings: float) -> np.ndarray:
    """Llama 3.1's rescaled θ_i: pairs turning slower than the original context's wavelength
    (long waves) are divided by `factor`, fast ones kept, and those between blended smoothly."""
    wavelength = 2 * math.pi / freqs
    low_wave = original_max_position_embeddings / low_freq_factor
    high_wave = original_max_position_embeddings / high_freq_factor
    smooth = (original_max_position_embeddings / wavelength - low_freq_factor) \
        / (high_freq_factor - low_freq_factor)
    blended = (1 - smooth) * freqs / factor + smooth * freqs
    return np.where(wavelength > low_wave, freqs / factor,
                    np.where(wavelength < high_wave, freqs, blended))
