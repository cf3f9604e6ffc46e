"""How a query and a key make a score: dot-product or additive, optionally after QK-norm.

    dot       QKᵀ[i, j] = q_i · k_j               grows with d_k, so a scaling mode divides by √d_k
    additive  QKᵀ[i, j] = tanh(q_i + k_j) · w_a    bounded by |w_a|₁, never divided
    QK-norm   q and k are first divided by their RMS, so only their direction counts
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Score(NamedTuple):
    name: str  # "dot" | "additive", as a scenario file spells it
    divides: bool  # is it divided by √d_k in the modes that scale?

    def raw(self, q: np.ndarray, k: np.ndarray, w_a: np.ndarray | None) -> np.ndarray:
        """(n, d_k), (m, d_k) -> (n, m) scores before any scaling."""
        if self.name == "additive":
            return np.tanh(q[:, None, :] + k[None, :, :]) @ w_a  # (n, m, d_k) @ (d_k,) -> (n, m)
        return q @ k.T  # (n, d_k) @ (d_k, m) -> (n, m)

    def raw_grad(self, d: np.ndarray, q: np.ndarray, k: np.ndarray,
                 w_a: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """∂L/∂q, ∂L/∂k (and ∂L/∂w_a for additive scores) from d = ∂L/∂ of raw(q, k, w_a)."""
        if self.name == "additive":
            T = np.tanh(q[:, None, :] + k[None, :, :])  # (n, m, d_k)
            pre = d[:, :, None] * w_a * (1.0 - T * T)  # (n, m, d_k): ∂L/∂(q_i + k_j), tanh' = 1 − tanh²
            return pre.sum(axis=1), pre.sum(axis=0), np.einsum("ij,ijc->c", d, T)
        return d @ k, d.T @ q, None  # (n, m) @ (m, d_k);  (m, n) @ (n, d_k)


class Scoring(NamedTuple):
    """A scenario's way of scoring (features/scores.py): the kind, and QK-norm with its scale."""

    score: Score
    qk_norm: bool = False
    qk_scale: float = 1.0


DOT = Score("dot", divides=True)
ADDITIVE = Score("additive", divides=False)
SCORES: dict[str, Score] = {s.name: s for s in (DOT, ADDITIVE)}


def rms_normalize(M: np.ndarray) -> np.ndarray:
    """Each row divided by its root-mean-square, exactly: q̂ = q / RMS(q), RMS(q) = √(mean(q²)), so
    only its direction counts (QK-norm). No ε: real layers add one inside the root for their
    gradients, which here would only make the shown q̂ wrong for small vectors; a zero row stays 0.

    Each row is first divided by its largest magnitude, so squaring can neither overflow (entries
    near 1e200) nor underflow (near 1e-200): RMS(q) = max|q| · RMS(q / max|q|)."""
    top = np.max(np.abs(M), axis=-1, keepdims=True)  # (rows, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        U = M / np.where(top > 0, top, 1.0)  # every entry in [-1, 1], the largest ±1
        rms = np.sqrt(np.mean(U * U, axis=-1, keepdims=True))  # ≥ 1/√d for a nonzero row
        return np.where(top > 0, U / np.where(rms > 0, rms, 1.0), 0.0)


def rms_normalize_grad(d: np.ndarray, M: np.ndarray) -> np.ndarray:
    """∂L/∂M from d = ∂L/∂M̂, M̂ = M / RMS(M) row by row: (d − M̂ · mean(d ⊙ M̂)) / RMS(M). A zero
    row, whose M̂ is set to 0 rather than defined, passes no gradient back."""
    top = np.max(np.abs(M), axis=-1, keepdims=True)  # (rows, 1), scaled as rms_normalize is
    with np.errstate(invalid="ignore", divide="ignore"):
        U = M / np.where(top > 0, top, 1.0)
        rms = top * np.sqrt(np.mean(U * U, axis=-1, keepdims=True))  # (rows, 1)
        hat = rms_normalize(M)
        out = (d - hat * np.mean(d * hat, axis=-1, keepdims=True)) / np.where(rms > 0, rms, 1.0)
    return np.where(top > 0, out, 0.0)
