"""ALiBi (Press et al., 2022): no positions added to X; each head h adds −m_h · |i − j| to its
scores, a penalty that grows linearly with the distance between query i and key j.

    B[i, j] = −m_h · |i − j|      (under a causal mask only j ≤ i is seen: −m_h · (i − j))

The slopes m_h are the paper's: for a power-of-two number of heads h, the geometric sequence
2^(−8/h), 2^(−16/h), …, 2^(−8); for other counts, the slopes of the closest smaller power of two,
then every other slope of twice that power, until there are h of them (ofirpress/
attention_with_linear_biases, get_slopes; transformers' build_alibi_tensor follows it).
"""

from __future__ import annotations

import numpy as np


def _power_of_two_slopes(heads: int) -> list[float]:
    """2^(−8/h), 2^(−16/h), …, 2^(−8h/h): h a power of two."""
    return [2.0 ** (-8.0 * (k + 1) / heads) for k in range(heads)]


def slopes(heads: int) -> list[float]:
    """The slope of each head, head 1 first (the steepest, the most local)."""
    power = 1 << (heads.bit_length() - 1)  # the largest power of two ≤ heads
    if power == heads:
        return _power_of_two_slopes(heads)
    # the paper's interleave: the slopes of 2·power fall between those of power; take every other
    return _power_of_two_slopes(power) + slopes(2 * power)[0::2][:heads - power]


def exponent(heads: int, head: int) -> tuple[int, int]:
    """The slope of `head` (0-based) as 2^(−a/b): (a, b), so the worked cell can write it so."""
    power = 1 << (heads.bit_length() - 1)
    if power == heads or head < power:
        return 8 * (head + 1), power
    return 8 * (2 * (head - power) + 1), 2 * power  # every other slope of 2·power, from the first


def distances(n: int, m: int) -> np.ndarray:
    """|i − j| for every query i and key j: (n, m)."""
    return np.abs(np.arange(n, dtype=np.float64)[:, None] - np.arange(m, dtype=np.float64)[None, :])


def bias(n: int, m: int, slope: float) -> np.ndarray:
    """B = −slope · |i − j|: (n, m). 0 − x rather than −x, so the diagonal is +0, not −0."""
    return 0.0 - slope * distances(n, m)
