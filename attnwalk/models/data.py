"""What reading a real model produces: the tokenization, the model's facts, and everything one
layer's walk needs (the interface the `attnwalk model` command builds its stages from)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnwalk.errors import UsageError
from attnwalk.layer.rope import rotate


class ModelError(UsageError):
    """A model that cannot be read or walked as asked; one line, exit 2."""


@dataclass(frozen=True)
class Tokenization:
    """The learner's sentence as the model's tokenizer cuts it (special tokens included)."""

    text: str
    words: tuple[str, ...]            # the learner's words as the pre-tokenizer splits them
    pieces: tuple[str, ...]           # "[CLS]", "river", "##bank", "Ġbank", ...
    ids: tuple[int, ...]
    special: tuple[bool, ...]         # added by the tokenizer ([CLS], [SEP], <|endoftext|>)
    word_of: tuple[int | None, ...]   # index into words per piece; None for special tokens
    unknown: tuple[bool, ...] = ()    # the tokenizer's unknown token ([UNK]): not in its vocabulary
    shown: tuple[str, ...] = ()       # the pieces as a reader sees them (tokens.shown_pieces), where they differ

    @property
    def readable(self) -> tuple[str, ...]:
        """The pieces as every screen shows them: a byte-level piece of 我 as <0xE6><0x88>, not æĪ."""
        return self.shown or self.pieces


@dataclass(frozen=True)
class ModelInfo:
    """What a model is: its name, where it was found, its family and sizes."""

    name: str                         # display name
    source: str                       # where it was found: a directory, the HF cache, the package
    family: str                       # "bert" | "gpt2" | "llama" (llama, qwen2, mistral) | "gemma3"
    model_type: str                   # config.json's model_type
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_model: int
    d_head: int
    vocab_size: int
    n_params: int
    file_bytes: int
    file_format: str = "safetensors"  # "safetensors" | "gguf"
    quantized: str | None = None      # --quantize: the type its weight matrices were quantized to


@dataclass(frozen=True)
class Norm:
    """One LayerNorm / RMSNorm as the model applies it, per token (row)."""

    kind: str                         # "layernorm" | "rmsnorm"
    x: np.ndarray                     # (n, d_model) its input
    mean: np.ndarray | None           # (n,) None for rmsnorm
    std: np.ndarray                   # (n,) sqrt(var + eps); rmsnorm: sqrt(mean(x²) + eps)
    gamma: np.ndarray                 # (d_model,)
    beta: np.ndarray | None           # (d_model,) None for rmsnorm
    eps: float
    y: np.ndarray                     # (n, d_model) its output


@dataclass(frozen=True)
class Mlp:
    """One layer's feed-forward as the model computes it, every piece kept: what a walk's FFN
    stages show (`attnwalk model --next`). Weights are in × out, as the lessons write W."""

    kind: str                         # "gelu" (GPT-2: φ(U)) | "swiglu" (Llama: silu(gate) ⊙ U)
                                      # | "geglu" (Gemma 3: gelu_tanh(gate) ⊙ U)
    activation: str                   # the config's name of φ: "gelu_new", "silu", "gelu_pytorch_tanh"
    H: np.ndarray                     # (n, d_model) the residual stream it reads (attention's output added)
    norm: Norm                        # the norm before it: its output is what W_1 (and W_gate) multiply
    W_1: np.ndarray                   # (d_model, d_ff) up (GPT-2's c_fc, Llama's up_proj)
    b_1: np.ndarray | None            # (d_ff,)
    W_gate: np.ndarray | None         # (d_model, d_ff) the gate (Llama's gate_proj; GPT-2: none)
    W_2: np.ndarray                   # (d_ff, d_model) down (c_proj, down_proj)
    b_2: np.ndarray | None            # (d_model,)
    U: np.ndarray                     # (n, d_ff) LN₂(H) · W_1 + b_1
    gate: np.ndarray | None           # (n, d_ff) LN₂(H) · W_gate, before its activation
    G: np.ndarray                     # (n, d_ff) φ(U), or φ(gate) ⊙ U
    F: np.ndarray                     # (n, d_model) G · W_2 + b_2
    post_norm: Norm | None            # Gemma 3's RMSNorm of F, what the residual adds
    Y: np.ndarray                     # (n, d_model) H + F (Gemma 3: H + its norm of F): the layer's output


@dataclass(frozen=True)
class Rope:
    """Rotary positions as a Llama-family model applies them: each head's queries and keys turned
    pair by pair (dimension i with i + d_head/2, "half"), pair i by position · θ_i. θ_i is
    rope_theta^(−2i/d_head), rescaled where the config says so (Llama 3.1's "llama3")."""

    theta: float                      # rope_theta, the base
    freqs: np.ndarray                 # (d_head/2,) θ_i as the model uses them, after any scaling
    positions: np.ndarray             # (n,) 0, 1, …, n − 1
    scaling: str | None               # None | "llama3"
    pairing: str = "half"

    def rotate(self, M: np.ndarray, heads: int) -> np.ndarray:
        """(n, heads·d_head) with every head's block rotated by its rows' positions."""
        d = M.shape[1] // heads
        return np.concatenate([rotate(M[:, h * d:(h + 1) * d], self.positions, self.theta,
                                      self.pairing, self.freqs) for h in range(heads)], axis=1)


@dataclass(frozen=True)
class ModelLayer:
    """Everything one attention layer's walk needs, float64. `layer` is 0-based (the CLI numbers
    layers and heads from 1). Weight matrices are in × out whatever the file's layout, so
    Q = X @ W_Q + b_Q as in the lessons."""

    info: ModelInfo
    layer: int
    tokens: Tokenization
    E_tok: np.ndarray                 # (n, d_model) token embeddings
    E_pos: np.ndarray | None          # (n, d_model) learned positions (None: RoPE models)
    E_seg: np.ndarray | None          # (n, d_model) BERT's segment (token type 0) embedding
    E_sum: np.ndarray                 # (n, d_model) their sum
    norm_in: Norm | None              # the norm whose output is X (BERT layer 0: the embedding
                                      # LayerNorm; BERT layer L>0: layer L-1's output LayerNorm;
                                      # GPT-2: this layer's ln_1; Llama: input RMSNorm)
    X: np.ndarray                     # (n, d_model) the matrix W_Q multiplies
    W_Q: np.ndarray                   # (d_model, H·d_head)
    b_Q: np.ndarray | None            # (H·d_head,)
    W_K: np.ndarray                   # (d_model, G·d_head), G = n_kv_heads
    b_K: np.ndarray | None
    W_V: np.ndarray                   # (d_model, G·d_head)
    b_V: np.ndarray | None
    W_O: np.ndarray                   # (H·d_head, d_model)
    b_O: np.ndarray | None            # (d_model,)
    causal: bool
    residual: np.ndarray              # (n, d_model) what the attention output is added to
    norm_after: tuple[np.ndarray, np.ndarray, float] | None  # BERT's post-attention LN (γ, β, eps)
    rope: Rope | None = None          # the Llama family's rotary positions (Q_rot, K_rot)
    window: int | None = None         # Mistral's sliding_window: key j seen when 0 ≤ i − j < window
    stored: dict | None = None        # a GGUF's W_Q, W_K, W_V, W_O as stored (quantblock.StoredWeight):
                                      # the type, and each weight's block for its worked cell
    q_norm: tuple[np.ndarray, float] | None = None  # Gemma 3's QK-norm: each head's q, and k, RMS-
    k_norm: tuple[np.ndarray, float] | None = None  # normalised with learned γ (d_head,) and ε
    post_norm: tuple[np.ndarray, float] | None = None  # Gemma 3's RMSNorm of O (γ, ε) before the residual
    scale: float | None = None        # what S divides by where it is not √d_head: √query_pre_attn_scalar
    kind: str | None = None           # Gemma 3: "sliding" (a local window, the local RoPE base) | "global"
    gemma: tuple | None = None        # Gemma 3: (one global layer in every N, the local base, what the
                                      # file did not say and llama.cpp's rule gave)
