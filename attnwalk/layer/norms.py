"""The two norms a layer's input goes through, row by row (one token's vector at a time):

    LayerNorm  (x − μ) / σ · γ + β,   μ = mean(x),  σ = √(var(x) + ε)   (population variance)
    RMSNorm    x / RMS · γ,           RMS = √(mean(x²) + ε)              (no mean, no β)

A real model's own norms (features/model/) and a scenario's `norm:` (features/norm.py) are both
computed here, so a worked cell and its table agree whichever asked.
"""

from __future__ import annotations

import numpy as np


def stats(x: np.ndarray, eps: float) -> np.ndarray:
    """Each row's mean μ and σ = √(var + ε): (n, d) -> (n, 2)."""
    mu = x.mean(axis=1)  # (n,)
    sigma = np.sqrt(((x - mu[:, None]) ** 2).mean(axis=1) + eps)  # (n,)
    return np.stack([mu, sigma], axis=1)  # (n, 2)


def normalized(x: np.ndarray, mu_sigma: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """(x − μ) / σ · γ + β, row by row: (n, d), (n, 2), (d,), (d,) -> (n, d)."""
    return (x - mu_sigma[:, :1]) / mu_sigma[:, 1:] * gamma + beta


def rms(x: np.ndarray, eps: float) -> np.ndarray:
    """Each row's RMS = √(mean(x²) + ε): (n, d) -> (n, 1)."""
    return np.sqrt((x ** 2).mean(axis=1, keepdims=True) + eps)


def rms_normalized(x: np.ndarray, rms_: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    """x / RMS · γ: (n, d), (n, 1), (d,) -> (n, d)."""
    return x / rms_ * gamma
