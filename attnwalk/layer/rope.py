"""Rotary position embedding (RoPE): a head's queries and keys turned pair by pair, by an angle that
grows with the token's position, instead of a position vector added to X.

    θ_i = base^(−2i/d_head),  i = 0 … d_head/2 − 1          (one frequency per pair)
    (x_a, x_b) → (x_a cos(pos·θ_i) − x_b sin(pos·θ_i),  x_a sin(pos·θ_i) + x_b cos(pos·θ_i))

Which dimensions make pair i is the `pairing`:
    half         a = i, b = i + d_head/2   (Llama, GPT-NeoX, Qwen, Mistral; Hugging Face's rotate_half)
    interleaved  a = 2i, b = 2i + 1        (the RoFormer paper; GPT-J, Meta's original Llama code)

A query at position p and a key at position r are turned by p·θ_i and r·θ_i, and a dot product of two
rotated pairs sees only the difference of their angles: q_rot · k_rot depends on p − r alone, so
shifting every position by the same amount leaves QKᵀ as it was.

Pure numpy; the real-model readers reuse `rotate` (with their own `freqs` where a config rescales
them, as Llama 3.1's rope_scaling does).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

PAIRINGS = ("half", "interleaved")
DEFAULT_BASE = 10000.0
SHIFT = 3  # how far the walk moves every position to show that the scores stay the same


class Rope(NamedTuple):
    """A scenario's rotary settings (`rope: {base: 10000, pairing: half}`). A real model whose
    config rescales the frequencies (Llama 3.1's rope_scaling) gives its own θ_i as `freqs`, and
    `scaling` names the rule; a scenario file never does (its θ_i always follow the base)."""

    base: float = DEFAULT_BASE
    pairing: str = "half"  # "half" | "interleaved"
    freqs: tuple[float, ...] | None = None  # (d_head/2,) θ_i as the model uses them, or None
    scaling: str | None = None  # "llama3" where freqs were rescaled

    def thetas(self, d_head: int) -> np.ndarray:
        """θ_i for i = 0 … d_head/2 − 1: the given ones, else base^(−2i/d_head)."""
        return frequencies(d_head, self.base) if self.freqs is None else np.array(self.freqs)

    def turn(self, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """One head's rows rotated by their positions with these settings: (n, d) -> (n, d)."""
        freqs = None if self.freqs is None else np.array(self.freqs)
        return rotate(x, positions, self.base, self.pairing, freqs)


def frequencies(d_head: int, base: float = DEFAULT_BASE) -> np.ndarray:
    """θ_i = base^(−2i/d_head) for i = 0 … d_head/2 − 1: (d_head/2,), θ_0 = 1, falling toward 1/base."""
    i = np.arange(d_head // 2, dtype=np.float64)
    return np.power(float(base), -2.0 * i / d_head)


def pairs(d_head: int, pairing: str = "half") -> tuple[np.ndarray, np.ndarray]:
    """The dimensions (a, b) of every pair i: two index arrays of length d_head/2."""
    half = d_head // 2
    if pairing == "half":
        return np.arange(half), np.arange(half) + half
    if pairing == "interleaved":
        return np.arange(0, 2 * half, 2), np.arange(1, 2 * half, 2)
    raise ValueError(f"unknown RoPE pairing {pairing!r}; expected one of {PAIRINGS}")


def pair_of(dim: int, d_head: int, pairing: str = "half") -> tuple[int, int, int]:
    """(i, a, b): the pair that dimension `dim` belongs to and its two dimensions (dim is a or b)."""
    if pairing == "half":
        i = dim % (d_head // 2)
        return i, i, i + d_head // 2
    i = dim // 2
    return i, 2 * i, 2 * i + 1


def angles(positions: np.ndarray, d_head: int, base: float = DEFAULT_BASE,
           freqs: np.ndarray | None = None) -> np.ndarray:
    """pos · θ_i for every position and pair: (n,) -> (n, d_head/2), in radians."""
    theta = frequencies(d_head, base) if freqs is None else np.asarray(freqs, dtype=np.float64)
    return np.asarray(positions, dtype=np.float64)[:, None] * theta[None, :]  # (n, 1) * (1, d/2)


def rotate(x: np.ndarray, positions: np.ndarray, base: float = DEFAULT_BASE,
           pairing: str = "half", freqs: np.ndarray | None = None) -> np.ndarray:
    """One head's rows rotated by their positions: (n, d_head), (n,) -> (n, d_head).

    `freqs` replaces θ_i (d_head/2 numbers) where a model rescales them; `base` is then unused."""
    x = np.asarray(x, dtype=np.float64)
    d_head = x.shape[-1]
    if d_head % 2:
        raise ValueError(f"RoPE needs an even head width, got d_head = {d_head}")
    a, b = pairs(d_head, pairing)
    phi = angles(positions, d_head, base, freqs)  # (n, d/2)
    cos, sin = np.cos(phi), np.sin(phi)
    out = np.empty_like(x)
    out[:, a] = x[:, a] * cos - x[:, b] * sin  # (n, d/2) each
    out[:, b] = x[:, a] * sin + x[:, b] * cos
    return out
