"""The Gemma 3 family, as llama.cpp stores it in a GGUF (general.architecture "gemma3") and
transformers' Gemma3 modeling computes it: token embeddings times √d_model; in each layer an
RMSNorm before attention, Q, K, V (grouped K/V heads), QK-norm (each head's q and k RMS-normalised
with learned weights), rotary positions with the local base on sliding-window layers and the global
base on global ones, scores divided by √query_pre_attn_scalar, W_O, an RMSNorm of the attention
output, the residual; then RMSNorm, the GELU-gated feed-forward, an RMSNorm of its output, the
residual.

Gemma's RMSNorm multiplies by (1 + w); llama.cpp's converter stores 1 + w (convert_hf_to_gguf.py,
Gemma3Model: every "norm.weight" + 1), so here every norm is x / RMS(x) · γ with γ the stored
numbers, as for Llama."""

from __future__ import annotations

import math

import numpy as np

from attnwalk.layer.rope import frequencies
from attnwalk.models.blocks import Attention, gated, gelu_tanh, rms_norm
from attnwalk.models.config import Config
from attnwalk.models.data import Mlp, Norm, Rope
from attnwalk.models.weights import Weights

ANCHOR = "embed_tokens.weight"


class Gemma3:
    """The state between layers is the residual stream."""

    def __init__(self, weights: Weights, cfg: Config) -> None:
        self.w, self.cfg = weights, cfg

    def embed(self, ids: list[int]) -> tuple[np.ndarray, None, None, np.ndarray]:
        """The token rows as stored (E_tok) and times √d_model (E_sum), which the first layer reads."""
        cfg = self.cfg
        E_tok = self.w.rows(ANCHOR, (cfg.vocab_size, cfg.d_model), "vocab_size × hidden_size", ids)
        return E_tok, None, None, E_tok * math.sqrt(cfg.d_model)

    def sliding(self, l: int) -> bool:
        """Layer l (0-based) sees a local window: all but every `window_every`-th layer."""
        return (l + 1) % self.cfg.gemma["window_every"] != 0

    def rope(self, n: int, local: bool = False) -> Rope:
        cfg = self.cfg
        theta = cfg.gemma["local_theta"] if local else cfg.rope["theta"]
        return Rope(theta=theta, freqs=frequencies(cfg.d_head, theta),
                    positions=np.arange(n, dtype=np.float64), scaling=None)

    def start(self, E_sum: np.ndarray) -> np.ndarray:
        return E_sum

    def layer(self, l: int, h: np.ndarray) -> dict:
        cfg, p = self.cfg, f"layers.{l}."
        d, q_width, kv_width = cfg.d_model, cfg.n_heads * cfg.d_head, cfg.n_kv_heads * cfg.d_head
        norm = self._norm(p + "input_layernorm", h, d)
        sliding = self.sliding(l)
        fields = {"norm_in": norm, "X": norm.y, "causal": True, "residual": h, "norm_after": None,
                  "window": cfg.sliding_window if sliding else None,
                  "rope": self.rope(h.shape[0], local=sliding), "kind": "sliding" if sliding else "global",
                  "scale": math.sqrt(cfg.gemma["query_pre_attn_scalar"]),
                  "gemma": (cfg.gemma["window_every"], cfg.gemma["local_theta"], cfg.gemma["assumed"])}
        for key, width in (("Q", q_width), ("K", kv_width), ("V", kv_width)):
            fields[f"W_{key}"] = self._linear(p + f"self_attn.{key.lower()}_proj", d, width)
            fields[f"b_{key}"] = None
        fields["W_O"], fields["b_O"] = self._linear(p + "self_attn.o_proj", q_width, d), None
        for key, name in (("q_norm", "self_attn.q_norm"), ("k_norm", "self_attn.k_norm")):
            fields[key] = (self.w.get(p + name + ".weight", (cfg.d_head,), "head_dim"), cfg.eps)
        fields["post_norm"] = (self.w.get(p + "post_attention_layernorm.weight", (d,), "hidden_size"), cfg.eps)
        return fields

    def finish(self, l: int, attention: Attention) -> np.ndarray:
        return self.mlp(l, attention).Y

    def mlp(self, l: int, attention: Attention) -> Mlp:
        """The pre-feed-forward RMSNorm, GeGLU (gelu_tanh(gate) ⊙ up, then down), the RMSNorm of
        its output and the residual, every piece kept."""
        cfg, p = self.cfg, f"layers.{l}."
        a = attention.after  # residual + RMSNorm(O)
        norm = self._norm(p + "pre_feedforward_layernorm", a, cfg.d_model)
        W_gate = self._linear(p + "mlp.gate_proj", cfg.d_model, cfg.d_ff)
        W_1 = self._linear(p + "mlp.up_proj", cfg.d_model, cfg.d_ff)
        W_2 = self._linear(p + "mlp.down_proj", cfg.d_ff, cfg.d_model)
        gate, U, G, F = gated(norm.y, W_gate, W_1, W_2, gelu_tanh)
        post = self._norm(p + "post_feedforward_layernorm", F, cfg.d_model)
        return Mlp("geglu", "gelu_pytorch_tanh", a, norm, W_1, None, W_gate, W_2, None, U, gate, G, F, post,
                   a + post.y)

    def _linear(self, name: str, d_in: int, d_out: int) -> np.ndarray:
        return self.w.get(name + ".weight", (d_out, d_in), f"{d_out} outputs × {d_in} inputs").T

    def _norm(self, name: str, x: np.ndarray, width: int) -> Norm:
        return rms_norm(x, self.w.get(name + ".weight", (width,), "hidden_size"), self.cfg.eps)
