"""The GPT-2 family: token + position embeddings; each layer LayerNorm (ln_1), causal attention
from the fused c_attn (Q, K, V side by side), c_proj, the residual; then ln_2, the MLP (gelu_new)
and its residual. Its Conv1D weights are stored in × out, as the lessons write W."""

from __future__ import annotations

import numpy as np

from attnwalk.models.blocks import ACTIVATIONS, Attention, layer_norm
from attnwalk.models.config import Config
from attnwalk.models.data import Mlp, Norm
from attnwalk.models.weights import Weights

ANCHOR = "wte.weight"


class Gpt2:
    """The state between layers is the residual stream (no norm at a layer's end)."""

    def __init__(self, weights: Weights, cfg: Config) -> None:
        self.w, self.cfg = weights, cfg

    def embed(self, ids: list[int]) -> tuple[np.ndarray, np.ndarray, None, np.ndarray]:
        cfg, n = self.cfg, len(ids)
        E_tok = self.w.rows(ANCHOR, (cfg.vocab_size, cfg.d_model), "vocab_size × n_embd", ids)
        E_pos = self.w.rows("wpe.weight", (cfg.max_positions, cfg.d_model), "n_positions × n_embd",
                            list(range(n)))
        return E_tok, E_pos, None, E_tok + E_pos

    def start(self, E_sum: np.ndarray) -> np.ndarray:
        return E_sum

    def layer(self, l: int, h: np.ndarray) -> dict:
        p, d = f"h.{l}.", self.cfg.d_model
        norm = self._norm(p + "ln_1", h)
        # c_attn is (d, 3d): Q's columns, then K's, then V's. (h.{l}.attn.bias, when a checkpoint
        # has it, is the causal-mask buffer, not this bias.)
        W = self._conv(p + "attn.c_attn", d, 3 * d)
        b = self.w.get(p + "attn.c_attn.bias", (3 * d,), "3 × n_embd")
        return {"norm_in": norm, "X": norm.y, "causal": True, "residual": h, "norm_after": None,
                "W_Q": W[:, :d], "W_K": W[:, d:2 * d], "W_V": W[:, 2 * d:],
                "b_Q": b[:d], "b_K": b[d:2 * d], "b_V": b[2 * d:],
                "W_O": self._conv(p + "attn.c_proj", d, d),
                "b_O": self.w.get(p + "attn.c_proj.bias", (d,), "n_embd")}

    def finish(self, l: int, attention: Attention) -> np.ndarray:
        return self.mlp(l, attention).Y

    def mlp(self, l: int, attention: Attention) -> Mlp:
        """ln_2, the MLP (c_fc, gelu_new, c_proj) and its residual, every piece kept."""
        p, d, d_ff = f"h.{l}.", self.cfg.d_model, self.cfg.d_ff
        a = attention.after  # residual + attention output
        norm = self._norm(p + "ln_2", a)
        W_1, b_1 = self._conv(p + "mlp.c_fc", d, d_ff), self.w.get(p + "mlp.c_fc.bias", (d_ff,), "n_inner")
        W_2, b_2 = self._conv(p + "mlp.c_proj", d_ff, d), self.w.get(p + "mlp.c_proj.bias", (d,), "n_embd")
        U = norm.y @ W_1 + b_1  # (n, d) @ (d, d_ff) -> (n, d_ff)
        G = ACTIVATIONS[self.cfg.activation](U)
        F = G @ W_2 + b_2  # (n, d_ff) @ (d_ff, d) -> (n, d)
        return Mlp("gelu", self.cfg.activation, a, norm, W_1, b_1, None, W_2, b_2, U, None, G, F, None, a + F)

    def _conv(self, name: str, d_in: int, d_out: int) -> np.ndarray:
        # GPT-2's Conv1D stores (in, out), unlike torch's Linear
        return self.w.get(name + ".weight", (d_in, d_out), f"{d_in} inputs × {d_out} outputs")

    def _norm(self, name: str, x: np.ndarray) -> Norm:
        d = self.cfg.d_model
        return layer_norm(x, self.w.get(name + ".weight", (d,), "n_embd"),
                          self.w.get(name + ".bias", (d,), "n_embd"), self.cfg.eps)
