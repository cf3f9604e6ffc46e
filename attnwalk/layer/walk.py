"""The numbers of one attention layer: pure functions over float64 arrays, no I/O, no printing.

    X = E + P;  Q = X W_Q,  K = X W_K,  V = X W_V;  S = Q Kᵀ / √d_k;  A = softmax(S + M);  Z = A V
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from attnwalk.errors import ComputeError
from attnwalk.scenario.model import Scenario, Sequence
from attnwalk.layer.stages import BY_KEY, STAGES, Stage

RMS_EPS = 1e-6  # RMSNorm's epsilon, as in real QK-norm layers


def sinusoidal(n: int, d_model: int) -> np.ndarray:
    """The Transformer's positions: P[pos, 2i] = sin(pos / 10000^(2i/d)), P[pos, 2i+1] = cos(same)."""
    pos = np.arange(n, dtype=np.float64)[:, None]  # (n, 1)
    pair = np.arange(d_model) // 2  # column j belongs to frequency pair i = j // 2
    angle = pos / np.power(10000.0, 2.0 * pair / d_model)  # (n, d_model)
    return np.where(np.arange(d_model) % 2 == 0, np.sin(angle), np.cos(angle))


def positions(seq: Sequence) -> np.ndarray:
    if seq.positional == "sinusoidal":
        return sinusoidal(seq.n, seq.d_model)
    if seq.positional == "explicit":
        return np.array(seq.P_given, dtype=np.float64)
    return np.zeros_like(seq.E)


def softmax(S: np.ndarray) -> np.ndarray:
    """Row-wise softmax, stable for huge scores: subtract each row's max before exp; −∞ gives 0."""
    top = np.max(S, axis=-1, keepdims=True)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(S - top)  # every exponent ≤ 0, so nothing overflows
    return e / e.sum(axis=-1, keepdims=True)


def uniform_weights(allowed: np.ndarray) -> np.ndarray:
    """Equal weight on every key a row may attend to; the scores are ignored."""
    counts = allowed.sum(axis=-1, keepdims=True)
    return allowed / counts


def hard_weights(masked_scores: np.ndarray) -> np.ndarray:
    """A one-hot row at each row's largest allowed score (the first of ties)."""
    A = np.zeros_like(masked_scores)
    A[np.arange(A.shape[0]), np.argmax(masked_scores, axis=-1)] = 1.0
    return A


def masked(S: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """S with −∞ wherever the mask forbids attending."""
    return np.where(allowed, S, -np.inf)


def rms_normalize(M: np.ndarray) -> np.ndarray:
    """Each row divided by its root-mean-square, so only its direction counts (QK-norm)."""
    return M / np.sqrt(np.mean(M * M, axis=-1, keepdims=True) + RMS_EPS)


def entropy_bits(A: np.ndarray) -> np.ndarray:
    """Entropy of each row of weights, in bits (0 for one-hot, log2 m for uniform)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(A > 0, -A * np.log2(np.where(A > 0, A, 1.0)), 0.0)
    return terms.sum(axis=-1)


def row_maxima(M: np.ndarray) -> np.ndarray:
    """(rows, cols) True at each row's largest finite value: at every one of them where several tie
    (equal within 1e-12 of the largest, so float rounding cannot split a tie such as uniform's
    1/3, 1/3, 1/3). A row with no finite value has none."""
    finite = np.where(np.isfinite(M), M, -np.inf)
    top = finite.max(axis=1, keepdims=True)  # (rows, 1)
    return np.isfinite(top) & (finite >= top - 1e-12 * np.maximum(np.abs(top), 1.0))


def softmax_signal(A: np.ndarray, mode: str) -> np.ndarray:
    """Largest entry of each row's Jacobian ∂A_i/∂S_i = diag(a) − a aᵀ, i.e. max_j a_j(1 − a_j).

    It shrinks toward 0 as a row saturates. Uniform and hard rows do not depend on the scores at
    all, so their signal is exactly 0.
    """
    if mode in ("uniform", "hard"):
        return np.zeros(A.shape[0])
    return np.max(A * (1.0 - A), axis=-1)


@dataclass(eq=False)  # no __eq__: == on numpy fields can only raise; defines faster
class Head:
    """One head's matrices, keyed like the stages: Q, K, V (its slices), QK^T, S, S+M, A, Z."""

    index: int
    mats: dict[str, np.ndarray]


@dataclass(eq=False)  # no __eq__, as Head
class Walk:
    """Every intermediate matrix of one layer for one scenario and mode, in stage order."""

    scenario: Scenario
    mode: str
    amplify: float
    mats: dict[str, np.ndarray]  # E, P, X, Q, K, V (full), and for one head its stages too
    heads: list[Head]
    source: dict[str, np.ndarray] = field(default_factory=dict)  # E, P, X of the source
    scale: float = 1.0  # what S divides QKᵀ by in this mode

    @property
    def stages(self) -> list[Stage]:
        """The stages this walk shows, in order (S + M only with a mask, concat/O only with heads)."""
        out = []
        for stage in STAGES:
            if stage.key == "S+M" and not self.scenario.masked:
                continue
            if stage.key == "concat" and self.scenario.heads == 1:
                continue
            if stage.key == "O" and self.scenario.W_O is None:
                continue
            out.append(stage)
        return out

    @property
    def steps(self) -> list[tuple[Stage, int]]:
        """The screens of the walk in order: (stage, head). Per-head stages repeat for each head
        (all stages of head 0, then of head 1, ...); other stages carry head 0."""
        shared_before = [s for s in self.stages if not s.per_head and s.key not in ("concat", "O")]
        per_head = [s for s in self.stages if s.per_head]
        after = [s for s in self.stages if s.key in ("concat", "O")]
        out = [(s, 0) for s in shared_before]
        for h in range(self.scenario.heads):
            out += [(s, h) for s in per_head]
        return out + [(s, 0) for s in after]

    def matrix(self, key: str, head: int = 0) -> np.ndarray:
        """The matrix of stage `key` (for per-head stages, of head `head`)."""
        if BY_KEY[key].per_head:
            return self.heads[head].mats[key]
        return self.mats[key]


def _check(M: np.ndarray, stage: str, hint: str) -> np.ndarray:
    if not np.all(np.isfinite(M)):
        raise ComputeError(f"{stage} overflows float64 (some values are beyond ±1.8e308); {hint}")
    return M


def compute(scn: Scenario, mode: str = "scaled", amplify: float = 1.0) -> Walk:
    """Run the layer: every stage's matrix for `scn` under `mode` (scaled|unscaled|uniform|hard)."""
    try:
        return _compute(scn, mode, amplify)
    except ComputeError as exc:  # name the file, as every scenario error does
        raise ComputeError(f"{scn.label}: {exc}") from None


def _compute(scn: Scenario, mode: str, amplify: float) -> Walk:
    with np.errstate(over="ignore", invalid="ignore"):
        P = positions(scn.main)
        X = _check(scn.main.E + P, "X", "use smaller embeddings or positions")  # (n, d_model)
        src = scn.source
        X_kv = X
        source: dict[str, np.ndarray] = {}
        if src is not None:
            P_src = positions(src)
            X_kv = _check(src.E + P_src, "source X", "use smaller source embeddings")  # (m, d_model)
            source = {"E": np.array(src.E), "P": P_src, "X": X_kv}
        hint = "use smaller embeddings or weights"
        Q = _check(X @ scn.W_Q, "Q", hint)  # (n, d_model) @ (d_model, h·d_k) -> (n, h·d_k)
        K = _check(X_kv @ scn.W_K, "K", hint)  # (m, d_model) @ (d_model, h·d_k) -> (m, h·d_k)
        V = _check(X_kv @ scn.W_V, "V", hint)  # (m, d_model) @ (d_model, h·d_v) -> (m, h·d_v)
        mats = {"E": np.array(scn.main.E), "P": P, "X": X, "Q": Q, "K": K, "V": V}
        d_k, d_v = scn.d_k, scn.d_v
        scale = 1.0 if mode == "unscaled" or scn.score == "additive" else math.sqrt(d_k)
        heads = []
        for h in range(scn.heads):
            q = Q[:, h * d_k:(h + 1) * d_k]  # (n, d_k): head h's contiguous column block
            k = K[:, h * d_k:(h + 1) * d_k]  # (m, d_k)
            v = V[:, h * d_v:(h + 1) * d_v]  # (m, d_v)
            heads.append(Head(h, _head(scn, q, k, v, mode, scale, amplify)))
        if scn.heads == 1:
            mats.update({k: heads[0].mats[k] for k in ("QK^T", "S", "S+M", "A", "Z")})
        else:
            mats["concat"] = np.concatenate([hd.mats["Z"] for hd in heads], axis=1)  # (n, h·d_v)
        if scn.W_O is not None:
            concat = mats.get("concat", mats.get("Z"))
            mats["O"] = _check(concat @ scn.W_O, "O", "use a smaller W_O")  # (n, h·d_v) @ (h·d_v, d_model)
    return Walk(scenario=scn, mode=mode, amplify=amplify, mats=mats, heads=heads, source=source,
                scale=scale)


def raw_scores(scn: Scenario, q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """QKᵀ for dot scores (after QK-norm if asked), or tanh(q_i + k_j)·w_a for additive ones."""
    if scn.qk_norm:
        q, k = rms_normalize(q), rms_normalize(k)
    if scn.score == "additive":
        raw = np.tanh(q[:, None, :] + k[None, :, :]) @ scn.w_a  # (n, m, d_k) @ (d_k,) -> (n, m)
    else:
        raw = q @ k.T  # (n, d_k) @ (d_k, m) -> (n, m)
    if scn.qk_norm:
        raw = raw * scn.qk_scale
    return raw


def _head(scn: Scenario, q: np.ndarray, k: np.ndarray, v: np.ndarray, mode: str,
          scale: float, amplify: float) -> dict[str, np.ndarray]:
    raw = _check(raw_scores(scn, q, k), "QK^T", "use smaller queries and keys")
    S = raw / scale
    scores = S if amplify == 1.0 else _check(S * amplify, "S", "use a smaller --amplify")
    SM = masked(scores, scn.allowed)  # (n, m), −∞ where forbidden
    if mode == "uniform":
        A = uniform_weights(scn.allowed)
    elif mode == "hard":
        A = hard_weights(SM)
    else:
        A = softmax(SM)
    Z = A @ v  # (n, m) @ (m, d_v) -> (n, d_v)
    return {"Q": q, "K": k, "V": v, "QK^T": raw, "S": S, "S+M": SM, "A": A,
            "Z": _check(Z, "Z", "use smaller values")}
