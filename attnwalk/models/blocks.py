"""The pieces every family is built from, in float64 exactly as the models compute them: the
norms, the feed-forward nonlinearities, and one attention layer run from a ModelLayer."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attnwalk.layer.ops import masked, softmax
from attnwalk.models.data import ModelLayer, Norm


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> Norm:
    """(x − mean) / sqrt(var + eps) · γ + β per row, var the population variance (as torch's)."""
    mean = x.mean(axis=-1)  # (n,)
    std = np.sqrt(((x - mean[:, None]) ** 2).mean(axis=-1) + eps)  # (n,)
    y = (x - mean[:, None]) / std[:, None] * gamma + beta
    return Norm("layernorm", x, mean, std, gamma, beta, eps, y)


def rms_norm(x: np.ndarray, gamma: np.ndarray, eps: float) -> Norm:
    """x / sqrt(mean(x²) + eps) · γ per row: no centring, no β (Llama's RMSNorm)."""
    rms = np.sqrt((x ** 2).mean(axis=-1) + eps)  # (n,)
    return Norm("rmsnorm", x, None, rms, gamma, None, eps, x / rms[:, None] * gamma)


def gelu_erf(x: np.ndarray) -> np.ndarray:
    """BERT's "gelu": x · Φ(x) with the exact normal CDF, 0.5 · x · (1 + erf(x/√2))."""
    erf = np.array([math.erf(v) for v in (x / math.sqrt(2.0)).ravel().tolist()]).reshape(x.shape)
    return 0.5 * x * (1.0 + erf)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GPT-2's "gelu_new": the tanh approximation 0.5x(1 + tanh(√(2/π)(x + 0.044715x³)))."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x: np.ndarray) -> np.ndarray:
    """x · sigmoid(x), written to stay finite for large negative x."""
    return x * (0.5 * (1.0 + np.tanh(0.5 * x)))


ACTIVATIONS = {"gelu": gelu_erf, "gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_tanh,
               "relu": lambda x: np.maximum(x, 0.0), "silu": silu, "swish": silu}


@dataclass(frozen=True)
class Attention:
    """One attention layer's every matrix, all heads. Q, K, V are after their biases and before
    any norm or rotation; with RoPE, Q_rot and K_rot are what the scores use."""

    Q: np.ndarray                     # (n, H·d_head)
    K: np.ndarray                     # (n, G·d_head)
    V: np.ndarray                     # (n, G·d_head)
    Q_rot: np.ndarray | None
    K_rot: np.ndarray | None
    S: np.ndarray                     # (H, n, n) scaled scores, −∞ where masked
    A: np.ndarray                     # (H, n, n)
    Z: np.ndarray                     # (n, H·d_head) the heads concatenated
    O: np.ndarray                     # (n, d_model) Z · W_O + b_O
    after: np.ndarray                 # (n, d_model) residual + O (BERT: then its LayerNorm)
    Q_hat: np.ndarray | None = None   # Gemma 3's QK-norm of Q and K (what the rotation turns)
    K_hat: np.ndarray | None = None
    O_post: np.ndarray | None = None  # Gemma 3's RMSNorm of O, what the residual adds


def gated(x: np.ndarray, W_gate: np.ndarray, W_1: np.ndarray, W_2: np.ndarray, act) -> tuple:
    """A gated feed-forward (Llama's SwiGLU, Gemma's GeGLU): gate = x · W_gate, U = x · W_1,
    G = act(gate) ⊙ U, F = G · W_2; every piece kept, (gate, U, G, F)."""
    gate = x @ W_gate  # (n, d) @ (d, d_ff) -> (n, d_ff)
    U = x @ W_1  # (n, d_ff)
    G = act(gate) * U
    return gate, U, G, G @ W_2  # F: (n, d_ff) @ (d_ff, d) -> (n, d)


def attend(ml: ModelLayer) -> Attention:
    """Run the attention of one ModelLayer: what the walk shows, and what the next layer reads."""
    H, G, d = ml.info.n_heads, ml.info.n_kv_heads, ml.info.d_head
    n = ml.X.shape[0]
    Q = _affine(ml.X, ml.W_Q, ml.b_Q)  # (n, d_model) @ (d_model, H·d) -> (n, H·d)
    K = _affine(ml.X, ml.W_K, ml.b_K)  # (n, G·d)
    V = _affine(ml.X, ml.W_V, ml.b_V)  # (n, G·d)
    Q_hat = K_hat = None
    if ml.q_norm is not None:  # Gemma 3: each head's q and k RMS-normalised, before the rotation
        Q_hat, K_hat = head_rms_norm(Q, H, *ml.q_norm), head_rms_norm(K, G, *ml.k_norm)
    Q_rot = K_rot = None
    if ml.rope is not None:
        Q_rot = ml.rope.rotate(Q if Q_hat is None else Q_hat, H)
        K_rot = ml.rope.rotate(K if K_hat is None else K_hat, G)
    elif Q_hat is not None:
        Q_rot, K_rot = Q_hat, K_hat
    Qh = (Q if Q_rot is None else Q_rot).reshape(n, H, d).transpose(1, 0, 2)  # (H, n, d)
    Kh = (K if K_rot is None else K_rot).reshape(n, G, d).transpose(1, 0, 2)  # (G, n, d)
    Vh = V.reshape(n, G, d).transpose(1, 0, 2)  # (G, n, d)
    share = H // G  # query heads h·share … (h+1)·share − 1 read K/V head h
    Kh, Vh = np.repeat(Kh, share, axis=0), np.repeat(Vh, share, axis=0)  # (H, n, d)
    S = Qh @ Kh.transpose(0, 2, 1) / (math.sqrt(d) if ml.scale is None else ml.scale)  # (H, n, n)
    if ml.causal:
        allowed = np.tril(np.ones((n, n), dtype=bool))  # j ≤ i
        if ml.window is not None:  # and i − j < window: the last `window` keys, itself included
            allowed &= np.triu(np.ones((n, n), dtype=bool), 1 - ml.window)
        S = masked(S, allowed)
    A = softmax(S)  # (H, n, n), each row sums to 1
    Z = (A @ Vh).transpose(1, 0, 2).reshape(n, H * d)  # (H, n, d) -> (n, H·d)
    O = _affine(Z, ml.W_O, ml.b_O)  # (n, H·d) @ (H·d, d_model) -> (n, d_model)
    O_post = None if ml.post_norm is None else rms_norm(O, *ml.post_norm).y  # Gemma 3's, on O
    after = ml.residual + (O if O_post is None else O_post)
    if ml.norm_after is not None:
        after = layer_norm(after, *ml.norm_after).y
    return Attention(Q, K, V, Q_rot, K_rot, S, A, Z, O, after, Q_hat, K_hat, O_post)


def head_rms_norm(M: np.ndarray, heads: int, gamma: np.ndarray, eps: float) -> np.ndarray:
    """Each head's block of each row RMS-normalised on its own, times γ (d_head,): QK-norm."""
    n, width = M.shape
    blocks = M.reshape(n, heads, width // heads)  # (n, heads, d_head)
    rms = np.sqrt((blocks ** 2).mean(axis=-1, keepdims=True) + eps)  # (n, heads, 1)
    return (blocks / rms * gamma).reshape(n, width)


def _affine(x: np.ndarray, W: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    return x @ W if b is None else x @ W + b
