"""An independent float64 attention layer, written apart from attnwalk.layer.walk, to test it against.

Plain loops and one-line formulas in the lessons' own notation: softmax(QKᵀ/√d_k + M)V.
"""

from __future__ import annotations

import math

import numpy as np


def sinusoidal_positions(n: int, d: int) -> np.ndarray:
    P = np.zeros((n, d))
    for pos in range(n):
        for j in range(d):
            angle = pos / (10000 ** (2 * (j // 2) / d))
            P[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return P


def rms_norm(x):
    """One vector over its root-mean-square, RMS = |x| / √d (math.hypot, which neither overflows
    nor underflows), as QK-norm applies it; the zero vector stays zero."""
    rms = math.hypot(*x) / math.sqrt(len(x))
    return [xi / rms if rms else 0.0 for xi in x]


def score(q, k, kind="dot", w_a=None, qk_norm=False, qk_scale=1.0):
    """One raw score, lesson 000 §1.1–1.2: q·k, or tanh(q + k)·w_a; with QK-norm, of the
    RMS-normalised q and k, times the scale."""
    if qk_norm:
        q, k = rms_norm(q), rms_norm(k)
    if kind == "additive":
        s = sum(math.tanh(qi + ki) * wi for qi, ki, wi in zip(q, k, w_a))
    else:
        s = sum(qi * ki for qi, ki in zip(q, k))
    return s * qk_scale if qk_norm else s


def normalized(X, kind, gamma, beta=None, eps=1e-5):
    """A norm before the projections, one row at a time, loop by loop: LayerNorm (Ba et al. 2016:
    population variance, ε inside the root) or RMSNorm (Zhang & Sennrich 2019: no mean, no β)."""
    out = []
    for row in np.asarray(X, dtype=float):
        d = len(row)
        if kind == "rms":
            rms = math.sqrt(sum(v * v for v in row) / d + eps)
            out.append([row[j] / rms * gamma[j] for j in range(d)])
        else:
            mu = sum(row) / d
            sigma = math.sqrt(sum((v - mu) ** 2 for v in row) / d + eps)
            out.append([(row[j] - mu) / sigma * gamma[j] + beta[j] for j in range(d)])
    return np.array(out)


def projected_input(scn, X):
    """What the projections read: X, or X normalised where the scenario has `norm:`."""
    norm = scn.setting("norm")
    if norm is None:
        return X
    beta = scn.param("norm_beta") if norm.kind == "layer" else None
    return normalized(X, norm.kind, scn.param("norm_gamma"), beta, norm.eps)


def rope_rotated(x, base=10000.0, pairing="half"):
    """RoPE (issue 19): row p's pair i turned by p · θ_i, θ_i = base^(−2i/d), one 2 × 2 rotation
    at a time; half pairs dimension i with i + d/2, interleaved 2i with 2i + 1."""
    n, d = x.shape
    out = np.array(x, dtype=float)
    for p in range(n):
        for i in range(d // 2):
            a, b = (i, i + d // 2) if pairing == "half" else (2 * i, 2 * i + 1)
            phi = p * base ** (-2 * i / d)
            c, s = math.cos(phi), math.sin(phi)
            out[p, a], out[p, b] = c * x[p, a] - s * x[p, b], s * x[p, a] + c * x[p, b]
    return out


def attention(X, X_kv, W_Q, W_K, W_V, allowed, mode="scaled", heads=1, W_O=None, kind="dot",
              w_a=None, qk_norm=False, qk_scale=1.0, rope=None, kv_heads=None, alibi=False):
    """Every matrix of one (multi-head) layer; `allowed` is the n × m boolean mask. `kind` is
    "dot" or "additive" (then scores are never divided by √d_k). `rope`: (base, pairing) to rotate
    each head's queries and keys by their positions before scoring. `kv_heads` g: query head h
    reads K/V head h // (heads / g); `alibi`: −m_h·|i − j| (the paper's slopes) added to S before
    softmax."""
    from variants_reference import paper_slopes

    Q, K, V = X @ W_Q, X_kv @ W_K, X_kv @ W_V
    g = kv_heads or heads
    d_k, d_v = W_Q.shape[1] // heads, W_V.shape[1] // g
    M = np.where(allowed, 0.0, -np.inf)
    n, m = len(X), len(X_kv)
    B = [np.zeros((n, m))] * heads
    if alibi:
        offset = np.abs(np.arange(n)[:, None] - np.arange(m)[None, :])
        B = [-slope * offset for slope in paper_slopes(heads)]
    per_head = []
    for h in range(heads):
        kv = h // (heads // g)
        q, k, v = Q[:, h * d_k:(h + 1) * d_k], K[:, kv * d_k:(kv + 1) * d_k], V[:, kv * d_v:(kv + 1) * d_v]
        q_head, k_head = q, k
        rotated = {}
        if rope is not None:
            q, k = rope_rotated(q, *rope), rope_rotated(k, *rope)
            rotated = {"Q_rot": q, "K_rot": k}
        if kind == "dot" and not qk_norm:
            raw = q @ k.T
        else:
            raw = np.array([[score(list(qi), list(kj), kind, w_a, qk_norm, qk_scale) for kj in k]
                            for qi in q]).reshape(len(q), len(k))
        unscaled = mode == "unscaled" or kind == "additive"
        S = raw if unscaled else raw / math.sqrt(d_k)  # uniform shows scaled S, ignores it
        if mode == "uniform":
            A = allowed / allowed.sum(axis=1, keepdims=True)
        else:
            L = S + B[h] + M
            A = np.exp(L - L.max(axis=1, keepdims=True))
            A = A / A.sum(axis=1, keepdims=True)
        per_head.append({"Q": q_head, "K": k_head, "V": v, **rotated, "QK^T": raw, "S": S, "S+B": S + B[h],
                         "A": A, "Z": A @ v})
    out = {"Q": Q, "K": K, "V": V, "heads": per_head}
    concat = np.concatenate([hd["Z"] for hd in per_head], axis=1)
    out["concat"] = concat
    if W_O is not None:
        out["O"] = concat @ W_O
    return out
