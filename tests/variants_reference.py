"""An independent reference for ALiBi, sliding windows and grouped-query heads, written from the
formulas of issue 19 with plain loops, apart from attnwalk.layer: each query head h reads K/V head
h // (heads / g), adds −m_h · |i − j| to its scaled scores, and sees key j when the window allows.
"""

from __future__ import annotations

import math

import numpy as np


def paper_slopes(heads: int) -> list[float]:
    """ALiBi's slopes as the paper's code builds them (ofirpress/attention_with_linear_biases):
    start = 2^(−2^−(log2 h − 3)) and ratio = start for a power of two; otherwise the closest
    power of two's slopes, then every other slope of twice that power."""
    def power_of_2(n: int) -> list[float]:
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]

    if math.log2(heads).is_integer():
        return power_of_2(heads)
    closest = 2 ** math.floor(math.log2(heads))
    return power_of_2(closest) + paper_slopes(2 * closest)[0::2][:heads - closest]


def window_allowed(n: int, width: int, causal: bool) -> np.ndarray:
    """Query i sees key j when 0 ≤ i − j < w (causal), or |i − j| < w."""
    out = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(n):
            out[i, j] = (0 <= i - j < width) if causal else (abs(i - j) < width)
    return out


def layer(X, W_Q, W_K, W_V, heads, kv_heads, allowed, alibi=False, mode="scaled", positions=None,
          rotate=None):
    """Per query head: q, k, v, S, B, A, Z (and concat). `rotate(M, positions)` is applied to each
    head's q and k when given (RoPE), before the scores."""
    n = X.shape[0]
    d_k = W_Q.shape[1] // heads
    d_v = W_V.shape[1] // kv_heads
    assert W_K.shape[1] == kv_heads * d_k
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    slopes = paper_slopes(heads) if alibi else [0.0] * heads
    group = heads // kv_heads
    out = []
    for h in range(heads):
        g = h // group
        q = Q[:, h * d_k:(h + 1) * d_k]
        k = K[:, g * d_k:(g + 1) * d_k]
        v = V[:, g * d_v:(g + 1) * d_v]
        if rotate is not None:
            q, k = rotate(q), rotate(k)
        S = np.zeros((n, n))
        B = np.zeros((n, n))
        for i in range(n):
            for j in range(n):
                raw = float(np.dot(q[i], k[j]))
                S[i, j] = raw if mode == "unscaled" else raw / math.sqrt(d_k)
                B[i, j] = -slopes[h] * abs(i - j)
        A = np.zeros((n, n))
        for i in range(n):
            seen = [j for j in range(n) if allowed[i, j]]
            if mode == "uniform":
                for j in seen:
                    A[i, j] = 1 / len(seen)
                continue
            top = max(S[i, j] + B[i, j] for j in seen)
            e = {j: math.exp(S[i, j] + B[i, j] - top) for j in seen}
            total = sum(e.values())
            for j in seen:
                A[i, j] = e[j] / total
        out.append({"Q": q, "K": k, "V": v, "S": S, "B": B, "S+B": S + B, "A": A, "Z": A @ v})
    return out
