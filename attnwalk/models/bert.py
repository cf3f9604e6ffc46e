"""The BERT family (and RoBERTa, XLM-R: the same layout, positions counted from the padding id
+ 1): token + position + segment embeddings, LayerNorm; each layer attention with
biased Q, K, V, W_O with bias, the residual and a LayerNorm, then the feed-forward (GELU), its
residual and a LayerNorm. Linear weights are stored out × in and are transposed here."""

from __future__ import annotations

import numpy as np

from attnwalk.models.blocks import ACTIVATIONS, Attention, layer_norm
from attnwalk.models.config import Config
from attnwalk.models.data import Norm
from attnwalk.models.weights import Weights

ANCHOR = "embeddings.word_embeddings.weight"


class Bert:
    """The state between layers is the Norm whose output the next layer reads."""

    def __init__(self, weights: Weights, cfg: Config) -> None:
        self.w, self.cfg = weights, cfg

    def embed(self, ids: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        cfg, w, n = self.cfg, self.w, len(ids)
        E_tok = w.rows(ANCHOR, (cfg.vocab_size, cfg.d_model), "vocab_size × hidden_size", ids)
        E_pos = w.rows("embeddings.position_embeddings.weight", (cfg.max_positions, cfg.d_model),
                       "max_position_embeddings × hidden_size", positions(ids, cfg.padding_idx))
        # One sentence: every token is in segment 0 (transformers' default token_type_ids).
        seg = w.rows("embeddings.token_type_embeddings.weight", (cfg.type_vocab_size, cfg.d_model),
                     "type_vocab_size × hidden_size", [0])
        E_seg = np.repeat(seg, n, axis=0)  # (n, d_model)
        return E_tok, E_pos, E_seg, E_tok + E_pos + E_seg

    def start(self, E_sum: np.ndarray) -> Norm:
        return self._norm("embeddings.LayerNorm", E_sum)

    def layer(self, l: int, state: Norm) -> dict:
        """The ModelLayer fields of layer l, given the Norm the previous step ended with."""
        p, d, inner = f"encoder.layer.{l}.attention.", self.cfg.d_model, self.cfg.n_heads * self.cfg.d_head
        fields = {"norm_in": state, "X": state.y, "causal": False, "residual": state.y}
        for key, name in (("Q", "self.query"), ("K", "self.key"), ("V", "self.value")):
            fields[f"W_{key}"] = self._linear(p + name, d, inner)
            fields[f"b_{key}"] = self._bias(p + name, inner)
        fields["W_O"], fields["b_O"] = self._linear(p + "output.dense", inner, d), self._bias(p + "output.dense", d)
        fields["norm_after"] = self._norm_params(p + "output.LayerNorm")
        return fields

    def finish(self, l: int, attention: Attention) -> Norm:
        """The feed-forward after attention, its residual and LayerNorm: the next layer's input."""
        p, d, d_ff = f"encoder.layer.{l}.", self.cfg.d_model, self.cfg.d_ff
        a = attention.after
        hidden = ACTIVATIONS[self.cfg.activation](a @ self._linear(p + "intermediate.dense", d, d_ff)
                                                  + self._bias(p + "intermediate.dense", d_ff))  # (n, d_ff)
        out = hidden @ self._linear(p + "output.dense", d_ff, d) + self._bias(p + "output.dense", d)
        return self._norm(p + "output.LayerNorm", a + out)

    def _linear(self, name: str, d_in: int, d_out: int) -> np.ndarray:
        # torch's Linear stores (out, in); the lessons multiply X @ W, so W is (in, out)
        return self.w.get(name + ".weight", (d_out, d_in), f"{d_out} outputs × {d_in} inputs").T

    def _bias(self, name: str, d_out: int) -> np.ndarray:
        return self.w.get(name + ".bias", (d_out,), f"{d_out} outputs")

    def _norm_params(self, name: str) -> tuple[np.ndarray, np.ndarray, float]:
        d = self.cfg.d_model
        return (self.w.get(name + ".weight", (d,), "hidden_size"),
                self.w.get(name + ".bias", (d,), "hidden_size"), self.cfg.eps)

    def _norm(self, name: str, x: np.ndarray) -> Norm:
        return layer_norm(x, *self._norm_params(name))


def positions(ids: list[int], padding_idx: int | None) -> list[int]:
    """Each token's row of the position table: 0, 1, … for BERT; for RoBERTa fairseq's rule, the
    count of non-padding tokens so far plus padding_idx (so padding_idx + 1, + 2, …)."""
    if padding_idx is None:
        return list(range(len(ids)))
    real = np.asarray(ids) != padding_idx
    return (np.where(real, np.cumsum(real) + padding_idx, padding_idx)).tolist()
