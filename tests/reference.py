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
    if norm is None or norm.placement == "post":  # post: the norms stand after the residual sums
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


# The scenario settings this reference computes (each feature's key in Scenario.settings) and those
# that do not change the layer's numbers (what to train toward, a tiled form of the same Z, the mask
# already given as `allowed`, quantized weights already read back into W, the sequences each training
# step draws in place of the tokens; later blocks and the unembedding, which come after block 1's
# numbers, those computed here): attention_of refuses
# any other, so a new feature cannot pass the reference checks by being left out of them.
COMPUTED = {"score", "alibi", "rope", "sinks", "norm", "residual", "ffn"}
UNCHANGED = {"target", "tiles", "mask", "quantize", "train", "sequences", "blocks", "unembed"}


def attention_of(scn, mode="scaled", allowed=None, X=None, X_kv=None):
    """attention() with every argument read off the scenario's own mapping (its settings and
    parameters), not listed by hand in each test: X and X_kv default to the walk's input (E + P,
    a source's), normalised where the scenario has a norm."""
    unknown = set(scn.settings) - COMPUTED - UNCHANGED
    assert not unknown, f"tests/reference.py does not compute {sorted(unknown)}: add it to attention_of"
    if X is None:
        from attnwalk.layer.walk import compute

        walk = compute(scn)
        X = walk.mats["X"]
        X_kv = walk.source["X"] if walk.source else X
    X_in = X
    X, X_kv = projected_input(scn, X), projected_input(scn, X if X_kv is None else X_kv)
    scoring, rope = scn.settings.get("score"), scn.settings.get("rope")
    out = attention(X, X_kv, np.array(scn.W_Q), np.array(scn.W_K), np.array(scn.W_V),
                     scn.allowed if allowed is None else allowed, mode, heads=scn.heads,
                     W_O=None if scn.W_O is None else np.array(scn.W_O),
                     kind="dot" if scoring is None else scoring.score.name, w_a=scn.params.get("w_a"),
                     qk_norm=bool(scoring and scoring.qk_norm), qk_scale=scoring.qk_scale if scoring else 1.0,
                     kv_heads=scn.groups, alibi=bool(scn.settings.get("alibi")),
                     rope=rope and (rope.base, rope.pairing),
                     sinks=scn.params["sinks"] if "sinks" in scn.settings else None)
    if scn.settings.get("residual"):
        out.update(block(scn, X_in, out["O"] if "O" in out else out["concat"]))
    return out


def block_end(scn):
    """The key of what the unembedding reads, written out: the FFN's Y (or H without an FFN), each
    normalised under post placement (LN₂(Y), LN(H)); without a residual the attention's O (concat)."""
    if not scn.settings.get("residual"):
        return "O" if scn.W_O is not None else "concat"
    norm = scn.setting("norm")
    post = norm is not None and norm.placement == "post"
    if scn.settings.get("ffn"):
        return "LN2" if post else "res_ffn"
    return "LN" if post else "res_attn"


def activation(kind, u):
    """One number through the FFN's activation, written from the papers' formulas: ReLU; GELU's
    tanh form (Hendrycks & Gimpel 2016; GPT-2's gelu_new); SiLU = u · sigmoid(u)."""
    if kind == "relu":
        return max(u, 0.0)
    if kind == "gelu":
        return 0.5 * u * (1 + math.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))
    return u / (1 + math.exp(-u))


def block(scn, X, O):
    """The rest of the block, loop by loop: H = X + O; pre placement: Y = H + FFN(LN₂(H)); post:
    LN(H), Y = LN(H) + FFN(LN(H)), LN₂(Y). Keys as the walk's stages (res_attn, LN2, U, G, F,
    res_ffn; LN is LN(H) under post)."""
    norm, kind = scn.setting("norm"), scn.setting("ffn")
    H = np.asarray(X, dtype=float) + np.asarray(O, dtype=float)
    out = {"res_attn": H}
    stream = H

    def normed(M, gamma, beta):
        return normalized(M, norm.kind, scn.param(gamma), scn.params.get(beta), norm.eps)

    if norm is not None and norm.placement == "post":
        stream = out["LN"] = normed(H, "norm_gamma", "norm_beta")
    if kind is None:
        return out
    x = stream
    if norm is not None and norm.placement == "pre":
        x = out["LN2"] = normed(H, "ffn_norm_gamma", "ffn_norm_beta")
    W_1, W_2 = np.asarray(scn.param("W_1")), np.asarray(scn.param("W_2"))
    n, d_ff = len(x), W_1.shape[1]
    b_1 = scn.params.get("b_1", np.zeros(d_ff))
    b_2 = scn.params.get("b_2", np.zeros(W_2.shape[1]))
    U = np.array([[sum(x[i, k] * W_1[k, j] for k in range(x.shape[1])) + b_1[j] for j in range(d_ff)]
                  for i in range(n)])
    if kind == "swiglu":
        W_g = np.asarray(scn.param("W_gate"))
        G = np.array([[activation("silu", sum(x[i, k] * W_g[k, j] for k in range(x.shape[1]))) * U[i, j]
                       for j in range(d_ff)] for i in range(n)])
    else:
        G = np.array([[activation(kind, U[i, j]) for j in range(d_ff)] for i in range(n)])
    F = G @ W_2 + b_2
    Y = stream + F
    out.update({"U": U, "G": G, "F": F, "res_ffn": Y})
    if norm is not None and norm.placement == "post":
        out["LN2"] = normed(Y, "ffn_norm_gamma", "ffn_norm_beta")
    return out


def attention(X, X_kv, W_Q, W_K, W_V, allowed, mode="scaled", heads=1, W_O=None, kind="dot",
              w_a=None, qk_norm=False, qk_scale=1.0, rope=None, kv_heads=None, alibi=False, sinks=None):
    """Every matrix of one (multi-head) layer; `allowed` is the n × m boolean mask. `kind` is
    "dot" or "additive" (then scores are never divided by √d_k). `rope`: (base, pairing) to rotate
    each head's queries and keys by their positions before scoring. `kv_heads` g: query head h
    reads K/V head h // (heads / g); `alibi`: −m_h·|i − j| (the paper's slopes) added to S before
    softmax; `sinks`: one logit per head in every row's softmax sum, no key's."""
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
            top = L.max(axis=1, keepdims=True)
            if sinks is not None:  # the head's sink logit: in each row's sum, no key's
                top = np.maximum(top, sinks[h])
            A = np.exp(L - top)
            total = A.sum(axis=1, keepdims=True)
            A = A / (total if sinks is None else total + np.exp(sinks[h] - top))
        per_head.append({"Q": q_head, "K": k_head, "V": v, **rotated, "QK^T": raw, "S": S, "S+B": S + B[h],
                         "A": A, "Z": A @ v})
    out = {"Q": Q, "K": K, "V": V, "heads": per_head}
    concat = np.concatenate([hd["Z"] for hd in per_head], axis=1)
    out["concat"] = concat
    if W_O is not None:
        out["O"] = concat @ W_O
    return out


def quantized(W, kind):
    """W (in × out) through Q8_0 or Q4_1 and back, as ggml's reference quantizer (ggml-quants.c,
    quantize_row_q8_0_ref / quantize_row_q4_1_ref) does it: each column of W is a GGUF row, cut
    into blocks of 32 along the inputs (a column shorter than 32, a lesson's, is one block), every
    step in float32, the block's d and m stored as float16. Written here block by block, apart from
    attnwalk.layer.quants; tests/test_quantize_scenario.py checks it against gguf-py itself."""
    W = np.asarray(W, dtype=np.float64)
    rows = W.shape[0]
    size = rows if rows < 32 else 32
    out = np.empty_like(W)
    f32 = np.float32
    for j in range(W.shape[1]):
        for start in range(0, rows, size):
            x = [f32(v) for v in W[start:start + size, j]]
            if kind.lower() == "q8_0":
                amax = max(abs(v) for v in x)
                d = f32(amax / f32(127))
                inv = f32(1) / d if d else f32(0)
                qs = [int(math.copysign(math.floor(abs(float(f32(v * inv))) + 0.5), float(v * inv))) for v in x]
                d16 = f32(np.float16(d))
                back = [f32(d16 * f32(q)) for q in qs]
            else:
                lo, hi = min(x), max(x)
                d = f32(f32(hi - lo) / f32(15))
                inv = f32(1) / d if d else f32(0)
                qs = [min(15, int(f32(f32(f32(v - lo) * inv) + f32(0.5)))) for v in x]
                d16, m16 = f32(np.float16(d)), f32(np.float16(lo))
                back = [f32(f32(d16 * f32(q)) + m16) for q in qs]
            out[start:start + size, j] = [float(v) for v in back]
    return out


# -- the unembedding (features/unembed.py): after the layer's (block's) output -----------------------

COMPUTED |= {"unembed"}  # noqa: F811 — computed by unembedded(), wrapped around attention_of below
_layer_of = attention_of


def unembedded(scn, Y):
    """The final norm (if any), the logits ℓ = Y · W_U (tied: the table transposed) and
    p = softmax(ℓ / T), each row one exponential at a time."""
    u = scn.settings["unembed"]
    out = {}
    if u.norm is not None:
        Y = normalized(Y, u.norm, scn.params["final_norm_gamma"], scn.params.get("final_norm_beta"), u.eps)
        out["LN_f"] = Y
    W = np.array(scn.params["vocab_embeddings"]).T if u.tied else np.array(scn.params["W_U"])
    logits = np.array([[sum(y[c] * W[c, w] for c in range(len(y))) for w in range(W.shape[1])] for y in Y])
    p = []
    for row in logits:
        top = max(row) / u.temperature
        e = [math.exp(x / u.temperature - top) for x in row]
        p.append([x / sum(e) for x in e])
    return {**out, "logits": logits, "p": np.array(p)}


def attention_of(scn, mode="scaled", allowed=None, X=None, X_kv=None):  # noqa: F811
    """The layer, then the unembedding where the scenario has one (its stages also under each
    head's entry, as the quiz looks a cell up there)."""
    out = _layer_of(scn, mode, allowed, X, X_kv)
    if "unembed" in scn.settings:
        Y = out[block_end(scn)]  # the block's output: Y, H, a norm after them, else O (concat)
        after = unembedded(scn, Y)
        out.update(after)
        for head in out["heads"]:
            head.update(after)
    return out
