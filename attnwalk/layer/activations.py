"""The feed-forward network's activation functions φ, each with its slope φ′ for the backward pass,
cell by cell (features/ffn.py):

    relu(u) = max(u, 0)                                            ReLU (the original Transformer)
    gelu(u) = ½ u (1 + tanh(√(2/π) (u + 0.044715 u³)))              GELU, the tanh form GPT-2 uses
    silu(u) = u · σ(u),  σ(u) = 1 / (1 + e^(−u))                    SiLU (Swish), Llama's gate

GELU here is the tanh approximation (Hendrycks & Gimpel, 2016, eq. in §2; GPT-2's `gelu_new`),
not the exact u · Φ(u) with erf that BERT uses: the two differ by less than 0.001.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

GELU_C = float(np.sqrt(2.0 / np.pi))  # √(2/π)
GELU_K = 0.044715


def sigmoid(u: np.ndarray) -> np.ndarray:
    """σ(u) = 1 / (1 + e^(−u)), written with tanh so that no e^(−u) overflows."""
    return 0.5 * (1.0 + np.tanh(0.5 * u))


def relu(u: np.ndarray) -> np.ndarray:
    return np.maximum(u, 0.0)


def relu_slope(u: np.ndarray) -> np.ndarray:
    return (u > 0).astype(np.float64)  # 0 at u = 0, as PyTorch takes it


def gelu(u: np.ndarray) -> np.ndarray:
    return 0.5 * u * (1.0 + np.tanh(GELU_C * (u + GELU_K * u ** 3)))


def gelu_slope(u: np.ndarray) -> np.ndarray:
    t = np.tanh(GELU_C * (u + GELU_K * u ** 3))
    return 0.5 * (1.0 + t) + 0.5 * u * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * GELU_K * u * u)


def silu(u: np.ndarray) -> np.ndarray:
    return u * sigmoid(u)


def silu_slope(u: np.ndarray) -> np.ndarray:
    s = sigmoid(u)
    return s * (1.0 + u * (1.0 - s))


class Activation(NamedTuple):
    name: str  # as the formulas write it: "GELU"
    apply: Callable[[np.ndarray], np.ndarray]
    slope: Callable[[np.ndarray], np.ndarray]


ACTIVATIONS = {"relu": Activation("ReLU", relu, relu_slope), "gelu": Activation("GELU", gelu, gelu_slope),
               "silu": Activation("SiLU", silu, silu_slope)}
