"""A GGUF file's tensors under the names the families ask for (Hugging Face's: "layers.3.self_attn.
q_proj.weight"), in the layout they expect, so bert.py, gpt2.py and llama.py read a GGUF exactly as
they read safetensors (weights.py): the same `get`, `rows`, `has` and `n_params`.

Two things differ from the Hugging Face layout and are undone here:
- llama.cpp permutes the rows of Llama's W_Q and W_K (convert_hf_to_gguf.py, `permute`) so each
  head's rotary pairs sit side by side (its rope pairs dimension 2i with 2i + 1); the Hugging Face
  model pairs i with i + d_head/2. The inverse permutation puts the rows back, so Q, K, Q_rot,
  K_rot and every column match the same model walked from safetensors. (Qwen2 is not permuted.)
- GPT-2's fused c_attn, c_proj and MLP weights are stored out × in (PyTorch Linear's order), where
  its Conv1D keeps in × out: they are transposed back.
"""

from __future__ import annotations

import re
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from attnwalk.models.data import ModelError
from attnwalk.models.ggufile import GGUFFile
from attnwalk.models.quantblock import StoredWeight

# (Hugging Face name, the GGUF tensor, stored out × in where the family reads in × out)
LLAMA = [(r"embed_tokens\.weight", "token_embd.weight", False),
         (r"layers\.(\d+)\.input_layernorm\.weight", "blk.{}.attn_norm.weight", False),
         (r"layers\.(\d+)\.self_attn\.q_proj\.(weight|bias)", "blk.{}.attn_q.{}", False),
         (r"layers\.(\d+)\.self_attn\.k_proj\.(weight|bias)", "blk.{}.attn_k.{}", False),
         (r"layers\.(\d+)\.self_attn\.v_proj\.(weight|bias)", "blk.{}.attn_v.{}", False),
         (r"layers\.(\d+)\.self_attn\.o_proj\.(weight|bias)", "blk.{}.attn_output.{}", False),
         (r"layers\.(\d+)\.post_attention_layernorm\.weight", "blk.{}.ffn_norm.weight", False),
         (r"layers\.(\d+)\.mlp\.gate_proj\.weight", "blk.{}.ffn_gate.weight", False),
         (r"layers\.(\d+)\.mlp\.up_proj\.weight", "blk.{}.ffn_up.weight", False),
         (r"layers\.(\d+)\.mlp\.down_proj\.weight", "blk.{}.ffn_down.weight", False)]
# the final norm and the LM head (absent: tied to token_embd, as llama.cpp reads the file)
HEAD = [(r"lm_head\.weight", "output.weight", False)]
GPT2 = [(r"wte\.weight", "token_embd.weight", False), (r"wpe\.weight", "position_embd.weight", False),
        (r"h\.(\d+)\.ln_1\.(weight|bias)", "blk.{}.attn_norm.{}", False),
        (r"h\.(\d+)\.attn\.c_attn\.weight", "blk.{}.attn_qkv.weight", True),
        (r"h\.(\d+)\.attn\.c_attn\.bias", "blk.{}.attn_qkv.bias", False),
        (r"h\.(\d+)\.attn\.c_proj\.weight", "blk.{}.attn_output.weight", True),
        (r"h\.(\d+)\.attn\.c_proj\.bias", "blk.{}.attn_output.bias", False),
        (r"h\.(\d+)\.ln_2\.(weight|bias)", "blk.{}.ffn_norm.{}", False),
        (r"h\.(\d+)\.mlp\.c_fc\.weight", "blk.{}.ffn_up.weight", True),
        (r"h\.(\d+)\.mlp\.c_fc\.bias", "blk.{}.ffn_up.bias", False),
        (r"h\.(\d+)\.mlp\.c_proj\.weight", "blk.{}.ffn_down.weight", True),
        (r"h\.(\d+)\.mlp\.c_proj\.bias", "blk.{}.ffn_down.bias", False),
        (r"ln_f\.(weight|bias)", "output_norm.{}", False), *HEAD]
GEMMA3 = [*LLAMA[:6],  # Llama's names, and its norms where they differ
          (r"layers\.(\d+)\.self_attn\.q_norm\.weight", "blk.{}.attn_q_norm.weight", False),
          (r"layers\.(\d+)\.self_attn\.k_norm\.weight", "blk.{}.attn_k_norm.weight", False),
          (r"layers\.(\d+)\.post_attention_layernorm\.weight", "blk.{}.post_attention_norm.weight", False),
          (r"layers\.(\d+)\.pre_feedforward_layernorm\.weight", "blk.{}.ffn_norm.weight", False),
          (r"layers\.(\d+)\.post_feedforward_layernorm\.weight", "blk.{}.post_ffw_norm.weight", False),
          *LLAMA[7:]]
LLAMA += [(r"norm\.weight", "output_norm.weight", False), *HEAD]
GEMMA3 += [(r"norm\.weight", "output_norm.weight", False), *HEAD]
LAYOUTS = {"llama": LLAMA, "gpt2": GPT2, "gemma3": GEMMA3}


def unpermute_rows(n_rows: int, heads: int) -> np.ndarray:
    """For each Hugging Face row of W_Q or W_K (out × in), the GGUF row that holds it: the inverse
    of llama.cpp's `permute`, which within each head takes row i·2 + s from Hugging Face's row
    s·(d/2) + i (reshape (heads, 2, d/2) → swap the last two axes)."""
    half = n_rows // heads // 2
    gguf_of = np.arange(n_rows).reshape(heads, half, 2).swapaxes(1, 2).reshape(n_rows)
    return gguf_of  # Hugging Face row r is GGUF row gguf_of[r]


class GGUFWeights:
    """The Weights interface over one GGUF file."""

    prefix = ""

    def __init__(self, file: GGUFFile, family: str, arch: str, n_heads: int, n_kv_heads: int) -> None:
        self.file, self.family, self.arch = file, family, arch
        self.file_bytes = file.file_bytes
        self._layout = [(re.compile(pattern), target, transposed)
                        for pattern, target, transposed in LAYOUTS[family]]
        # llama.cpp's rope layout permutes Llama's Q and K; Qwen2's rope already pairs i, i + d/2
        self._permuted = {"attn_q": n_heads, "attn_k": n_kv_heads} if arch == "llama" else {}
        self._last: int | None = None
        self._pending: dict[str, Future] = {}
        self._pool: ThreadPoolExecutor | None = None

    def plan(self, last: int) -> None:
        """The layers up to `last` (0-based) will be computed, in order, and of `last` only its
        attention. Dequantizing is most of a deep layer's time (gguf.quants is numpy code, ~11 ms
        of CPU for one 576 × 1536 Q4_1 matrix, ~1.3 s for SmolLM2's 29 layers before layer 30), so
        two threads dequantize the next layer's tensors while this one is computed; at most two
        layers' weights are held at once. The numbers are the same in whatever thread they are made."""
        if self._last != last:  # asked again for the same layer: already under way
            self._last = last
            self._ahead(0)

    def _ahead(self, layer: int) -> None:
        if self._last is None or layer > self._last:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="dequantize")
        prefix = f"blk.{layer}."
        for target in self.file.tensors:
            if target.startswith(prefix) and target not in self._pending \
                    and (layer < self._last or ".attn_" in target):
                self._pending[target] = self._pool.submit(self.file.dequantized, target)

    def _dequantized(self, target: str) -> np.ndarray:
        if target.startswith("blk."):
            self._ahead(int(target.split(".")[1]) + 1)  # the next layer, while this one is used
        pending = self._pending.pop(target, None)
        return pending.result() if pending is not None else self.file.dequantized(target)

    def n_params(self) -> int:
        return sum(int(np.prod(t.shape, dtype=np.int64)) for t in self.file.tensors.values())

    def has(self, name: str) -> bool:
        found = self._target(name)
        return found is not None and found[0] in self.file.tensors

    def shape(self, name: str) -> tuple[int, ...]:
        target, transposed = self._tensor(name)
        shape = self.file.tensors[target].shape
        return tuple(reversed(shape)) if transposed else shape

    def get(self, name: str, shape: tuple[int, ...], why: str) -> np.ndarray:
        """The tensor as the family expects it, float64, checked against the metadata's `shape`."""
        self._check(name, shape, why)
        target, transposed = self._tensor(name)
        value = self._dequantized(target)
        order = self._order(target, value.shape[0])
        if order is not None:
            value = value[order]
        return value.T if transposed else value  # checked finite as it was dequantized

    def rows(self, name: str, shape: tuple[int, ...], why: str, rows: list[int]) -> np.ndarray:
        """Only these rows of a table (an embedding): only their blocks are dequantized."""
        self._check(name, shape, why)
        target, _ = self._tensor(name)
        if not rows:
            return np.zeros((0, shape[1]))
        return self.file.dequantized(target, list(rows))

    def row_span(self, name: str, shape: tuple[int, ...], why: str, start: int, stop: int) -> np.ndarray:
        """Rows start … stop − 1 of a table (a slice of the LM head): only their blocks dequantized."""
        return self.rows(name, shape, why, list(range(start, stop)))

    def stored(self, layer: int, d_model: int) -> dict[str, StoredWeight]:
        """How W_Q, W_K, W_V and W_O of this layer are stored, for the worked cells and the
        opening screen: each attnwalk column j (an output) is the file's row `rows[j]`."""
        found = {}
        if self.family == "gpt2":
            target = f"blk.{layer}.attn_qkv.weight"
            for index, key in enumerate(("W_Q", "W_K", "W_V")):  # Q's rows, then K's, then V's
                found[key] = self._stored(target, np.arange(index * d_model, (index + 1) * d_model))
        else:
            for key, part in (("W_Q", "attn_q"), ("W_K", "attn_k"), ("W_V", "attn_v")):
                target = f"blk.{layer}.{part}.weight"
                order = self._order(target, self.file.tensors[target].shape[0])
                found[key] = self._stored(target, order)
        found["W_O"] = self._stored(f"blk.{layer}.attn_output.weight", None)
        return found

    def _stored(self, target: str, rows: np.ndarray | None) -> StoredWeight:
        info = self.file.tensors[target]
        rows = np.arange(info.shape[0]) if rows is None else rows
        return StoredWeight(info=info, raw=self.file.raw(target), rows=rows)

    def _order(self, target: str, n_rows: int) -> np.ndarray | None:
        part = target.split(".")[2] if target.startswith("blk.") else ""
        heads = self._permuted.get(part)
        return None if heads is None else unpermute_rows(n_rows, heads)

    def _target(self, name: str) -> tuple[str, bool] | None:
        for pattern, target, transposed in self._layout:
            match = pattern.fullmatch(name)
            if match:
                return target.format(*match.groups()), transposed
        return None

    def _tensor(self, name: str) -> tuple[str, bool]:
        found = self._target(name)
        if found is None or found[0] not in self.file.tensors:
            where = name if found is None else found[0]
            raise ModelError(f"{self.file.path}: missing tensor {where}")
        return found

    def _check(self, name: str, shape: tuple[int, ...], why: str) -> None:
        found = self.shape(name)
        if found != tuple(shape):
            target = self._tensor(name)[0]
            raise ModelError(f"{self.file.path}: {target} has shape {_shape(found)}, but the "
                             f"file's metadata says {_shape(shape)} ({why})")


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ")"
