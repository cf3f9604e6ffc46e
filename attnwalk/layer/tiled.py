"""The tiled (online) softmax: Z computed keys B at a time, without ever holding a row's scores whole.

The recurrence of Milakov & Gimelshein 2018 ("Online normalizer calculation for softmax"), as
FlashAttention's Algorithm 1 runs it over blocks of keys; like FlashAttention-2, Õ is kept
unnormalised and divided once at the end:

    m_new = max(m, rowmax(S_blk))        the running maximum (−∞ before the first visible key)
    α     = exp(m − m_new)               rescales what was accumulated against the old maximum
    l     = α·l + rowsum(exp(S_blk − m_new))
    Õ     = α·Õ + exp(S_blk − m_new) · V_blk
    O     = Õ / l                        equals softmax(S + M) · V, row for row

A block whose keys the mask hides entirely is skipped, as kernels skip it: m, l and Õ carry over
unchanged and no α is computed (None). All rows advance together, one block of keys at a time,
so at most n × B scores exist at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from attnwalk.layer.modes import Mode


class Step(NamedTuple):
    """One block of keys for every row (n rows): the state before and after it."""

    start: int  # the block holds keys start … stop − 1
    stop: int
    scores: np.ndarray  # (n, stop − start) the block's scores, −∞ where masked
    visible: np.ndarray  # (n,) bool: the row sees at least one key of the block (else: skipped)
    block_max: np.ndarray  # (n,) rowmax(S_blk), −∞ where skipped
    m_old: np.ndarray  # (n,) −∞ before the row's first visible key
    m: np.ndarray  # (n,) m_new
    alpha: np.ndarray  # (n,) exp(m_old − m_new); NaN where skipped (a kernel computes none)
    p: np.ndarray  # (n, stop − start) exp(S_blk − m_new), 0 where masked
    l_old: np.ndarray  # (n,)
    l: np.ndarray  # (n,)
    O_old: np.ndarray  # (n, d_v) Õ before the block
    O: np.ndarray  # (n, d_v) Õ after it


def blocks(m: int, B: int) -> list[tuple[int, int]]:
    """The key ranges [start, stop) of width B (the last may be narrower)."""
    return [(start, min(start + B, m)) for start in range(0, m, B)]


def steps(SM: np.ndarray, V: np.ndarray, B: int, start: float | None = None) -> Iterator[Step]:
    """The recurrence over the key blocks of width B, for every row of SM at once.

    SM (n, m): the scores the softmax reads, −∞ where masked; V (m, d_v). `start`: a logit the
    softmax also normalises over that is no key's (an attention sink): the running maximum starts
    at it and the running sum at e⁰ = 1, with nothing added to Õ."""
    n, d_v = SM.shape[0], V.shape[1]
    m = np.full(n, -np.inf if start is None else float(start))
    l = np.zeros(n) if start is None else np.ones(n)
    O = np.zeros((n, d_v))
    for start, stop in blocks(SM.shape[1], B):
        S_blk = SM[:, start:stop]  # (n, B): the only scores held
        visible = np.isfinite(S_blk).any(axis=1)  # (n,)
        block_max = S_blk.max(axis=1)  # (n,) −∞ where the whole block is masked
        m_new = np.maximum(m, block_max)  # (n,)
        base = np.where(np.isfinite(m_new), m_new, 0.0)  # a skipped row before its first key
        with np.errstate(over="ignore", invalid="ignore"):
            # α = e^(−∞) = 0 at a row's first visible block: there is nothing yet to rescale
            alpha = np.where(np.isfinite(m), np.exp(np.where(np.isfinite(m), m, 0.0) - base), 0.0)
            p = np.exp(S_blk - base[:, None])  # (n, B) e^−∞ = 0 for masked keys; every exponent ≤ 0
        l_new = np.where(visible, alpha * l + p.sum(axis=1), l)
        O_new = np.where(visible[:, None], alpha[:, None] * O + p @ V[start:stop], O)  # (n, B) @ (B, d_v)
        yield Step(start, stop, S_blk, visible, block_max, m, np.where(visible, m_new, m),
                   np.where(visible, alpha, np.nan), p, l, l_new, O, O_new)
        m, l, O = np.where(visible, m_new, m), l_new, O_new


def output(SM: np.ndarray, V: np.ndarray, B: int, start: float | None = None) -> np.ndarray:
    """Z by the tiled form: Õ / l after the last block, (n, d_v). Every row sees some key (the
    scenario's mask guarantees it), and l ≥ 1 (the row's maximum contributes e⁰)."""
    last = None
    for last in steps(SM, V, B, start):
        pass
    assert last is not None  # m ≥ 1 key
    return last.O / last.l[:, None]


def row_steps(SM: np.ndarray, V: np.ndarray, B: int, row: int, start: float | None = None) -> list[Step]:
    """The recurrence for one row, block by block (each Step's arrays have one row)."""
    return list(steps(SM[row:row + 1], V, B, start))


def start_logit(scn, mode: Mode, head: int) -> float | None:
    """What the running maximum starts at for head `head`: the softmax's own extra logit (the
    graph's softmax stage says it: an attention sink), in the modes whose softmax reads it."""
    from attnwalk.layer.graph import get

    extra = get(scn.graph, "A").extra_logit
    return None if extra is None or not (mode.reads_scores and mode.smooth) else float(extra(scn, head))


def tiled_scores(mode: Mode, SM: np.ndarray, allowed: np.ndarray) -> np.ndarray | None:
    """The scores the tiled form runs on in `mode`: the masked scores the softmax reads; in
    uniform mode M alone (0 where allowed), whose softmax is the uniform weights; None in hard
    mode, whose argmax has no normaliser to compute online."""
    if mode.reads_scores and mode.smooth:
        return SM
    if not mode.reads_scores:
        return np.where(allowed, 0.0, -np.inf)  # (n, m)
    return None


def memory(n: int, m: int, d_v: int, B: int) -> dict[str, int]:
    """Numbers held at once by one head: the direct form's scores and weights (n × m each), the
    tiled form's one block of scores (n × min(B, m)) and its running state m, l (n each), Õ."""
    width = min(B, m)
    return {"direct_scores": n * m, "direct_weights": n * m, "tiled_scores": n * width,
            "tiled_state": 2 * n + n * d_v}


def defined_in(mode: Mode) -> bool:
    """Has `mode` a tiled form? Softmax modes and uniform (softmax of M); hard mode's argmax has
    no running sum to rescale, so its walk has no tiled stage."""
    return mode.smooth or not mode.reads_scores
