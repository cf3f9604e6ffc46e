"""A GGUF file's metadata read into the same Config a config.json gives (config.py), for the
architectures attnwalk computes: llama (Llama, SmolLM, Mistral: llama.cpp writes them all as
"llama"), qwen2 and gpt2. Keys are llama.cpp's: `{arch}.block_count`, `{arch}.attention.head_count`, …"""

from __future__ import annotations

import math
from dataclasses import replace

from attnwalk.models.config import Config
from attnwalk.models.data import ModelError
from attnwalk.models.ggufile import GGUFFile

ARCHITECTURES = {"llama": "llama", "qwen2": "llama", "gpt2": "gpt2", "gemma3": "gemma3"}
# llama.cpp's own rule for gemma3 where a file does not say (llama-model.cpp, LLM_ARCH_GEMMA3:
# set_swa_pattern(6), rope_freq_base_train_swa = 10000; f_attention_scale = 1/√n_embd_head_k)
GEMMA3_DEFAULTS = {"window_every": 6, "local_theta": 10000.0}


def gguf_config(file: GGUFFile) -> Config:
    """The Config the file's metadata describes, or a one-line ModelError naming the key."""
    config = _config(file)
    bos = file.fields.get("tokenizer.ggml.bos_token_id")
    return replace(config, bos=bos) if isinstance(bos, int) and not isinstance(bos, bool) else config


def _config(file: GGUFFile) -> Config:
    arch = file.fields.get("general.architecture")
    family = ARCHITECTURES.get(arch) if isinstance(arch, str) else None
    if family is None:
        raise ModelError(f"{file.path}: general.architecture {arch!r} is not one attnwalk computes "
                         f"(it reads {', '.join(sorted(ARCHITECTURES))})")
    meta = _Meta(file, arch)
    d_model, n_heads = meta.count("embedding_length"), meta.count("attention.head_count")
    vocab = _vocab_size(file, meta)
    common = dict(n_layers=meta.count("block_count"), n_heads=n_heads, d_model=d_model,
                  d_ff=meta.count("feed_forward_length"), vocab_size=vocab,
                  max_positions=meta.count("context_length"), type_vocab_size=0)
    if family == "gemma3":
        return _gemma3(file, meta, common, n_heads)
    if family == "gpt2":
        if d_model % n_heads:
            raise meta.fail(f"attention.head_count {n_heads} does not divide embedding_length {d_model}")
        return Config(family="gpt2", model_type="gpt2", n_kv_heads=n_heads, d_head=d_model // n_heads,
                      eps=meta.number("attention.layer_norm_epsilon", 1e-5), activation="gelu_new",
                      qkv_bias=True, out_bias=True, **common)
    n_kv = meta.count("attention.head_count_kv", n_heads)
    if n_heads % n_kv:
        raise meta.fail(f"attention.head_count_kv {n_kv} does not divide attention.head_count {n_heads}")
    d_head = meta.count("attention.key_length", d_model // n_heads if d_model % n_heads == 0 else None)
    rotated = meta.count("rope.dimension_count", d_head)
    if rotated != d_head:
        raise meta.fail(f"rope.dimension_count {rotated}: rotating only part of each head "
                        f"(of {d_head}) is not computed")
    kind = file.fields.get(f"{arch}.rope.scaling.type", "none")
    if kind not in ("none", None):
        raise meta.fail(f"rope.scaling.type {kind!r} is not one attnwalk computes")
    window = file.fields.get(f"{arch}.attention.sliding_window")
    window = window if isinstance(window, int) and window > 0 else None
    # llama.cpp writes Mistral as "llama"; a file that keeps its sliding window is walked as Mistral
    model_type = "mistral" if arch == "llama" and window is not None else arch
    biased = "blk.0.attn_q.bias" in file.tensors
    return Config(family="llama", model_type=model_type, n_kv_heads=n_kv, d_head=d_head,
                  eps=meta.number("attention.layer_norm_rms_epsilon", 1e-6), activation="silu",
                  qkv_bias=biased, out_bias="blk.0.attn_output.bias" in file.tensors,
                  rope={"theta": meta.number("rope.freq_base", 10000.0), "scaling": None,
                        "factors": _rope_factors(file, d_head)},
                  sliding_window=window if model_type == "mistral" else None, **common)


def _gemma3(file: GGUFFile, meta: _Meta, common: dict, n_heads: int) -> Config:
    n_kv = meta.count("attention.head_count_kv", n_heads)
    if n_heads % n_kv:
        raise meta.fail(f"attention.head_count_kv {n_kv} does not divide attention.head_count {n_heads}")
    d_head = meta.count("attention.key_length")
    if meta.count("attention.value_length", d_head) != d_head:
        raise meta.fail("attention.value_length: values as wide as keys are computed only")
    window = meta.count("attention.sliding_window")
    assumed = [key for key, name in (("window_every", "attention.sliding_window_pattern"),
                                     ("local_theta", "rope.freq_base_swa"))
               if f"gemma3.{name}" not in file.fields]
    gemma = {"window_every": meta.count("attention.sliding_window_pattern", GEMMA3_DEFAULTS["window_every"]),
             "local_theta": meta.number("rope.freq_base_swa", GEMMA3_DEFAULTS["local_theta"]),
             "query_pre_attn_scalar": float(d_head), "assumed": tuple(assumed)}
    return Config(family="gemma3", model_type="gemma3", n_kv_heads=n_kv, d_head=d_head,
                  eps=meta.number("attention.layer_norm_rms_epsilon", 1e-6), activation="gelu_pytorch_tanh",
                  qkv_bias=False, out_bias=False,
                  rope={"theta": meta.number("rope.freq_base", 1e6), "scaling": None, "factors": None},
                  sliding_window=window, gemma=gemma, **common)


def _rope_factors(file: GGUFFile, d_head: int) -> tuple[float, ...] | None:
    """Llama 3.1's rescaled frequencies: llama.cpp stores them as one factor per pair in the tensor
    rope_freqs.weight (θ_i is divided by it) instead of the config's rope_scaling."""
    if "rope_freqs.weight" not in file.tensors:
        return None
    factors = file.dequantized("rope_freqs.weight").ravel()
    if factors.shape != (d_head // 2,) or not (factors > 0).all():
        raise ModelError(f"{file.path}: rope_freqs.weight: expected {d_head // 2} positive factors "
                         f"(one per pair of a head's {d_head} dimensions)")
    return tuple(float(f) for f in factors)


def _vocab_size(file: GGUFFile, meta: _Meta) -> int:
    """The embedding table's rows: what the tokenizer's ids must stay below."""
    embedding = file.tensors.get("token_embd.weight")
    if embedding is None:
        raise ModelError(f"{file.path}: no tensor token_embd.weight: not a model's weights")
    return embedding.shape[0]


class _Meta:
    """Typed reads of `{arch}.KEY`, each error naming the file and the key."""

    def __init__(self, file: GGUFFile, arch: str) -> None:
        self.file, self.arch = file, arch

    def count(self, key: str, default: int | None = None) -> int:
        value = self.file.fields.get(f"{self.arch}.{key}", default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.fail(f"{key}: expected a positive whole number, got {value!r}")
        return value

    def number(self, key: str, default: float) -> float:
        value = self.file.fields.get(f"{self.arch}.{key}", default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
                or not math.isfinite(value):
            raise self.fail(f"{key}: expected a positive number, got {value!r}")
        return float(value)

    def fail(self, message: str) -> ModelError:
        return ModelError(f"{self.file.path}: {self.arch}.{message}")
