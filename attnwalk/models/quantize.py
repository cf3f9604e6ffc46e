"""`attnwalk model --quantize q4_1`: a model's weight matrices quantized the way llama.cpp stores
them, by the `gguf` library's own quantizer (gguf.quants.quantize) and read back by its own
dequantizer, so the learner can set the same layer at float and at 4 bits side by side.

Every weight matrix of every layer (attention and feed-forward) is quantized in blocks along its
inputs, as convert_hf_to_gguf.py and llama-quantize do; the embeddings, norms and biases stay as
stored. The blocks are kept, so the walk's worked cells show them as for a GGUF file.
"""

from __future__ import annotations

import numpy as np

from attnwalk.models.data import ModelError
from attnwalk.models.ggufile import TensorInfo, require_gguf
from attnwalk.models.quantblock import StoredWeight

KINDS = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0")  # the types gguf.quants can write
# GPT-2's Conv1D stores in × out: its blocks run along the rows of the transpose
CONV = (".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight")
TABLES = ("embed", "wte.", "wpe.", "token_type", "position_embeddings", "word_embeddings")
# family -> each attention weight's tensor ("{l}" the layer) and, for a fused one, its row block
ATTENTION = {
    "bert": {"W_Q": ("encoder.layer.{l}.attention.self.query.weight", None),
             "W_K": ("encoder.layer.{l}.attention.self.key.weight", None),
             "W_V": ("encoder.layer.{l}.attention.self.value.weight", None),
             "W_O": ("encoder.layer.{l}.attention.output.dense.weight", None)},
    "gpt2": {"W_Q": ("h.{l}.attn.c_attn.weight", 0), "W_K": ("h.{l}.attn.c_attn.weight", 1),
             "W_V": ("h.{l}.attn.c_attn.weight", 2), "W_O": ("h.{l}.attn.c_proj.weight", None)},
    "llama": {"W_Q": ("layers.{l}.self_attn.q_proj.weight", None), "W_K": ("layers.{l}.self_attn.k_proj.weight", None),
              "W_V": ("layers.{l}.self_attn.v_proj.weight", None), "W_O": ("layers.{l}.self_attn.o_proj.weight", None)},
}
ATTENTION["gemma3"] = ATTENTION["llama"]  # Gemma 3's projections have Llama's names


def check_kind(kind: str) -> str:
    if kind.lower() not in KINDS:
        raise ModelError(f"--quantize {kind}: choose one of {', '.join(KINDS)} (the types the gguf "
                         f"library can write)")
    return kind.upper()


class QuantizedWeights:
    """Another Weights (weights.py, ggufweights.py) with its weight matrices quantized to `kind`."""

    def __init__(self, inner, kind: str, family: str) -> None:
        self.gguf = require_gguf()
        self.inner, self.kind, self.family = inner, kind, family
        self.type = self.gguf.GGMLQuantizationType[kind]
        self.block, self.size = self.gguf.GGML_QUANT_SIZES[self.type]
        self.prefix, self.file_bytes = inner.prefix, inner.file_bytes
        self._raw: dict[str, np.ndarray] = {}  # name -> the quantized bytes, (out rows, bytes a row)

    def __getattr__(self, name: str):  # n_params, has, shape, rows: as the weights underneath
        return getattr(self.inner, name)

    def get(self, name: str, shape: tuple[int, ...], why: str) -> np.ndarray:
        value = self.inner.get(name, shape, why)
        if value.ndim != 2 or not name.endswith(".weight") or any(t in name for t in TABLES):
            return value
        conv = name.endswith(CONV) and self.family == "gpt2"
        W = value.T if conv else value  # (out, in): blocks of `block` weights along the inputs
        if W.shape[1] % self.block:
            raise ModelError(f"--quantize {self.kind.lower()}: {name} has {W.shape[1]} inputs, which do not "
                             f"split into blocks of {self.block} (a tiny model's rows are too short)")
        raw = self.gguf.quants.quantize(np.ascontiguousarray(W, dtype=np.float32), self.type)
        self._raw[name] = raw
        back = np.asarray(self.gguf.quants.dequantize(raw, self.type), dtype=np.float64).reshape(W.shape)
        return back.T if conv else back

    def stored(self, layer: int, d_model: int) -> dict[str, StoredWeight]:
        """The layer's W_Q, W_K, W_V, W_O as this quantization stores them (their blocks)."""
        found = {}
        for key, (pattern, part) in ATTENTION[self.family].items():
            raw = self._raw.get(pattern.format(l=layer))
            if raw is None:
                return {}
            rows = np.arange(raw.shape[0]) if part is None else np.arange(part * d_model, (part + 1) * d_model)
            info = TensorInfo(name=pattern.format(l=layer), kind=self.kind, type_id=int(self.type),
                              shape=(raw.shape[0], raw.shape[1] // self.size * self.block), offset=0,
                              nbytes=raw.nbytes, block_size=self.block, type_size=self.size)
            found[key] = StoredWeight(info=info, raw=raw, rows=rows)
        return found
