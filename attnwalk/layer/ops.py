"""The numeric operations the stages are made of: pure functions over float64 arrays."""

from __future__ import annotations

import numpy as np

from attnwalk.errors import ComputeError


def sinusoidal(n: int | np.ndarray, d_model: int) -> np.ndarray:
    """The Transformer's positions: P[pos, 2i] = sin(pos / 10000^(2i/d)), P[pos, 2i+1] = cos(same),
    for pos = 0 … n − 1, or for the positions given (decoding makes one row at a time)."""
    pos = np.asarray(np.arange(n) if np.ndim(n) == 0 else n, dtype=np.float64)[:, None]  # (n, 1)
    pair = np.arange(d_model) // 2  # column j belongs to frequency pair i = j // 2
    angle = pos / np.power(10000.0, 2.0 * pair / d_model)  # (n, d_model)
    return np.where(np.arange(d_model) % 2 == 0, np.sin(angle), np.cos(angle))


def product(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """A @ B, where a sum that cancels exactly (2 × 1 + 5 × (-0.4)) is 0 rather than the float
    noise a fused multiply-add leaves (-1.1e-16, which a table would print as a number): an entry
    no larger than the rounding bound of its dot product, d·ε·Σ|a_k b_k|, is indistinguishable
    from 0 in float64. Only entries tiny against the largest are checked, so this costs little."""
    M = A @ B  # (n, d) @ (d, k) -> (n, k)
    top = float(np.max(np.abs(M), initial=0.0))
    if not 0 < top < np.inf:  # nothing to clean, or an overflow the stage reports as it is
        return M
    rows, cols = np.nonzero(np.abs(M) <= 1e-12 * top)
    if len(rows) == 0:
        return M
    scale = np.einsum("ik,ki->i", np.abs(A[rows]), np.abs(B[:, cols]))  # Σ|a_k b_k| per entry
    noise = np.abs(M[rows, cols]) <= A.shape[1] * np.finfo(np.float64).eps * scale
    M[rows[noise], cols[noise]] = 0.0
    return M


def softmax(S: np.ndarray, extra: float | None = None) -> np.ndarray:
    """Row-wise softmax, stable for huge scores: subtract each row's max before exp; −∞ gives 0.
    `extra`: a logit every row also normalises over that is no column's (an attention sink): its
    e^extra joins each row's sum, so the row sums to 1 minus its share."""
    top = np.max(S, axis=-1, keepdims=True)
    if extra is not None:
        top = np.maximum(top, extra)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(S - top)  # every exponent ≤ 0, so nothing overflows
    total = e.sum(axis=-1, keepdims=True)
    return e / (total if extra is None else total + np.exp(extra - top))


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


def finite(M: np.ndarray, stage: str, hint: str) -> np.ndarray:
    """M, or a ComputeError naming the stage when a value overflowed float64."""
    if not np.all(np.isfinite(M)):
        raise ComputeError(f"{stage} overflows float64 (some values are beyond ±1.8e308); {hint}",
                           stage=stage)
    return M


def rows_sum_to_one(W: np.ndarray) -> bool:
    """Does every row of weights W sum to 1 (to float64's rounding of a long sum)? Not where the
    softmax also normalised over a logit that is no column (an attention sink took a share)."""
    return bool(np.all(np.abs(np.sum(W, axis=-1) - 1.0) < 1e-12))
