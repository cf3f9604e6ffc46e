"""Which keys each query may attend to, for the masks a scenario names rather than lists.

    causal             query i sees key j when j ≤ i
    window w, causal   query i sees key j when 0 ≤ i − j < w: itself and the w − 1 before it
                       (Mistral's sliding window: w keys including itself)
    window w           query i sees key j when |i − j| < w: a band w − 1 wide on either side
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Mask(NamedTuple):
    """A scenario's mask (features/masks.py): its kind, and a sliding window's width and direction."""

    kind: str  # "causal" | "window" | "explicit"
    window: int | None = None  # the keys a query sees, itself included
    causal: bool = True  # the window looks back only (0 ≤ i − j < w), else |i − j| < w


def causal(n: int) -> np.ndarray:
    """(n, n) bool: True on and below the diagonal."""
    return np.tril(np.ones((n, n), dtype=bool))


def window(n: int, width: int, is_causal: bool) -> np.ndarray:
    """(n, n) bool: the sliding window of `width` keys (causal), or the band |i − j| < width."""
    offset = np.arange(n)[:, None] - np.arange(n)[None, :]  # i − j
    if is_causal:
        return (offset >= 0) & (offset < width)
    return np.abs(offset) < width
