"""config.json read into the few numbers the computation needs, each checked, for the families
attnwalk computes: BERT, GPT-2 and the Llama layout (llama, qwen2, mistral)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from attnwalk.models.data import ModelError

# model_type -> family; a family is one layout of tensor names and one order of operations
# (RoBERTa and XLM-R are BERT's layout with positions counted from pad_token_id + 1)
FAMILIES = {"bert": "bert", "roberta": "bert", "xlm-roberta": "bert", "gpt2": "gpt2", "llama": "llama", "qwen2": "llama", "mistral": "llama"}
ACTIVATIONS = {"gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish"}


@dataclass(frozen=True)
class Config:
    """What a family's computation reads from config.json (names are attnwalk's, not the file's)."""

    family: str
    model_type: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_model: int
    d_head: int
    d_ff: int
    vocab_size: int
    max_positions: int
    type_vocab_size: int              # BERT's segments; 0 elsewhere
    eps: float                        # every LayerNorm / RMSNorm of the model uses this one
    activation: str                   # the feed-forward's nonlinearity, as the config names it
    qkv_bias: bool
    out_bias: bool
    rope: dict | None = None          # Llama family: {"theta": ..., "scaling": {...} | None}
    padding_idx: int | None = None    # RoBERTa: positions start at padding_idx + 1 (fairseq's rule)
    sliding_window: int | None = None
    bos: int | None = None            # the id a sequence starts with, where the model names one
    gemma: dict | None = None         # Gemma 3: local_theta, window_every, query_pre_attn_scalar, and
                                      # which of them the file's metadata did not say (from llama.cpp)
    tied: bool | None = None          # the LM head is the token embedding (tie_word_embeddings); None:
                                      # as the file has it (a GGUF: tied where it holds no output.weight)


def read_config(path: Path) -> Config:
    """config.json as a Config, or a one-line ModelError naming the file and the field."""
    from attnwalk.models.find import read_json

    raw = read_json(path, "JSON config")
    if not isinstance(raw, dict):
        raise ModelError(f"{path}: expected a JSON object")
    model_type = raw.get("model_type")
    family = FAMILIES.get(model_type) if isinstance(model_type, str) else None
    if family is None:
        known = ", ".join(sorted(FAMILIES))
        raise ModelError(f"{path}: model_type: {model_type!r} is not a family attnwalk computes "
                         f"(it reads {known})")
    field = _Fields(path, raw)
    config = {"bert": _bert, "gpt2": _gpt2, "llama": _llama}[family](field, model_type)
    # transformers' defaults: GPT2Config ties the LM head to wte, Llama/Qwen2/Mistral's configs do not
    tied = raw.get("tie_word_embeddings", family == "gpt2")
    if not isinstance(tied, bool):
        raise field.fail(f"tie_word_embeddings: expected true or false, got {tied!r}")
    config = replace(config, tied=tied)
    bos = raw.get("bos_token_id")  # BERT names none: its sequences start with [CLS]
    return replace(config, bos=bos) if isinstance(bos, int) and not isinstance(bos, bool) else config


class _Fields:
    """Typed reads from the config, each error naming the file and the key."""

    def __init__(self, path: Path, raw: dict) -> None:
        self.path, self.raw = path, raw

    def count(self, key: str, default: int | None = None) -> int:
        value = self.raw.get(key, default)
        if value is None and default is not None:
            value = default
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ModelError(f"{self.path}: {key}: expected a positive whole number, got {value!r}")
        return value

    def index(self, key: str) -> int:
        value = self.raw.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ModelError(f"{self.path}: {key}: expected a whole number ≥ 0, got {value!r}")
        return value

    def number(self, key: str, default: float | None = None) -> float:
        value = self.raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
                or not math.isfinite(value):
            raise ModelError(f"{self.path}: {key}: expected a positive number, got {value!r}")
        return float(value)

    def choice(self, key: str, default: str, allowed: set[str]) -> str:
        value = self.raw.get(key, default)
        if not isinstance(value, str) or value not in allowed:
            raise ModelError(f"{self.path}: {key}: {value!r} is not one attnwalk computes "
                             f"(expected one of {', '.join(sorted(allowed))})")
        return value

    def heads(self, d_model: int, n_heads: int) -> int:
        if d_model % n_heads:
            raise ModelError(f"{self.path}: {n_heads} heads do not divide hidden size {d_model}")
        return d_model // n_heads

    def fail(self, message: str) -> ModelError:
        return ModelError(f"{self.path}: {message}")


def _bert(f: _Fields, model_type: str) -> Config:
    d_model, n_heads = f.count("hidden_size"), f.count("num_attention_heads")
    d_head = f.heads(d_model, n_heads)
    f.choice("position_embedding_type", "absolute", {"absolute"})
    if f.raw.get("is_decoder") or f.raw.get("add_cross_attention"):
        raise f.fail("is_decoder: attnwalk computes BERT as an encoder (no causal mask, no cross-attention)")
    return Config(family="bert", model_type=model_type, n_layers=f.count("num_hidden_layers"),
                  n_heads=n_heads, n_kv_heads=n_heads, d_model=d_model,
                  d_head=d_head, d_ff=f.count("intermediate_size"),
                  vocab_size=f.count("vocab_size"), max_positions=f.count("max_position_embeddings"),
                  type_vocab_size=f.count("type_vocab_size", 2), eps=f.number("layer_norm_eps", 1e-12),
                  activation=f.choice("hidden_act", "gelu", ACTIVATIONS - {"silu", "swish"}),
                  qkv_bias=True, out_bias=True,
                  padding_idx=f.index("pad_token_id") if model_type != "bert" else None)


def _gpt2(f: _Fields, model_type: str) -> Config:
    d_model, n_heads = f.count("n_embd"), f.count("n_head")
    d_head = f.heads(d_model, n_heads)
    for flag in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"):
        if f.raw.get(flag):
            raise f.fail(f"{flag}: this GPT-2 variant is not one attnwalk computes")
    if f.raw.get("scale_attn_weights") is False:
        raise f.fail("scale_attn_weights: false (scores not divided by √d_head) is not computed")
    return Config(family="gpt2", model_type=model_type, n_layers=f.count("n_layer"),
                  n_heads=n_heads, n_kv_heads=n_heads, d_model=d_model,
                  d_head=d_head, d_ff=f.count("n_inner", 4 * d_model),
                  vocab_size=f.count("vocab_size"), max_positions=f.count("n_positions"),
                  type_vocab_size=0, eps=f.number("layer_norm_epsilon", 1e-5),
                  activation=f.choice("activation_function", "gelu_new", ACTIVATIONS - {"silu", "swish"}),
                  qkv_bias=True, out_bias=True)


def _llama(f: _Fields, model_type: str) -> Config:
    d_model, n_heads = f.count("hidden_size"), f.count("num_attention_heads")
    n_kv = f.count("num_key_value_heads", n_heads)
    if n_heads % n_kv:
        raise f.fail(f"num_key_value_heads: {n_kv} does not divide num_attention_heads {n_heads}")
    d_head = f.count("head_dim", d_model // n_heads if d_model % n_heads == 0 else None)
    if d_head % 2:  # refused here, where the file is named, before any layer is computed
        raise f.fail(f"head_dim: {d_head} is odd, but rotary positions turn pairs of dimensions: it must be even")
    bias = model_type == "qwen2" or bool(f.raw.get("attention_bias", False))
    window = f.raw.get("sliding_window")
    if model_type == "qwen2" and not f.raw.get("use_sliding_window", False):
        window = None
    if f.raw.get("mlp_bias"):
        raise f.fail("mlp_bias: biases in the feed-forward are not computed")
    params = f.raw.get("rope_parameters")
    partial = (params if isinstance(params, dict) else {}).get(
        "partial_rotary_factor", f.raw.get("partial_rotary_factor", 1.0))
    if partial not in (1, 1.0, None):
        raise f.fail(f"partial_rotary_factor {partial!r}: rotating only part of each head is not computed")
    return Config(family="llama", model_type=model_type, n_layers=f.count("num_hidden_layers"),
                  n_heads=n_heads, n_kv_heads=n_kv, d_model=d_model, d_head=d_head,
                  d_ff=f.count("intermediate_size"), vocab_size=f.count("vocab_size"),
                  max_positions=f.count("max_position_embeddings"), type_vocab_size=0,
                  eps=f.number("rms_norm_eps", 1e-6),
                  activation=f.choice("hidden_act", "silu", {"silu", "swish"}),
                  qkv_bias=bias, out_bias=model_type != "qwen2" and bool(f.raw.get("attention_bias")),
                  rope=_rope(f), sliding_window=window if isinstance(window, int) and window > 0 else None)


def _rope(f: _Fields) -> dict:
    """RoPE's base and scaling, from either config style: rope_theta + rope_scaling (older) or
    rope_parameters {rope_type, rope_theta, ...} (transformers 5)."""
    params = f.raw.get("rope_parameters")
    if params is not None and not isinstance(params, dict):
        raise f.fail(f"rope_parameters: expected an object, got {params!r}")
    if isinstance(params, dict):
        theta, scaling = params.get("rope_theta", f.raw.get("rope_theta", 10000.0)), params
    else:
        theta, scaling = f.raw.get("rope_theta", 10000.0), f.raw.get("rope_scaling")
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 1:
        raise f.fail(f"rope_theta: expected a number above 1, got {theta!r}")
    kind = "default"
    if isinstance(scaling, dict):
        kind = scaling.get("rope_type", scaling.get("type", "default"))
    elif scaling is not None:
        raise f.fail(f"rope_scaling: expected an object or null, got {scaling!r}")
    if kind not in ("default", "llama3"):
        raise f.fail(f"rope scaling {kind!r} is not one attnwalk computes (it reads default and llama3)")
    if kind == "llama3":
        need = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
        missing = [k for k in need if not isinstance(scaling.get(k), (int, float))]
        if missing:
            raise f.fail(f"rope scaling llama3: {missing[0]}: expected a number")
        if not scaling["high_freq_factor"] > scaling["low_freq_factor"]:
            raise f.fail("rope scaling llama3: high_freq_factor must be above low_freq_factor")
        return {"theta": float(theta), "scaling": {k: float(scaling[k]) for k in need}}
    return {"theta": float(theta), "scaling": None}
