"""Blocks of Q8_0, Q5_0, Q4_K and Q6_K read apart from their bytes, as ggml-common.h lays them out
and ggml-quants.c's dequantize_row_* reads them, and each weight worked out in float32 as gguf-py
does (tests/test_kquants.py: equal to gguf.quants.dequantize bit for bit over random blocks).

Every function takes blocks as bytes, (n, bytes a block), and returns each weight's fields
broadcast to (n, weights a block), so the worked cell can name any weight's own d, sc, m and q.
"""

from __future__ import annotations

import numpy as np

QK_K = 256  # a K-quant super-block's weights


def _half(raw: np.ndarray, at: int) -> np.ndarray:
    """The float16 at byte `at` of every block, as float32: (n, 1)."""
    return np.ascontiguousarray(raw[:, at:at + 2]).view(np.float16).astype(np.float32)


def q8_0(raw: np.ndarray) -> dict[str, np.ndarray]:
    """block_q8_0: d (float16), then 32 signed bytes q; w = d·q."""
    d = _half(raw, 0)
    q = raw[:, 2:34].view(np.int8).astype(np.int32)  # (n, 32)
    return {"d": np.broadcast_to(d, q.shape), "q": q, "w": q.astype(np.float32) * d}


def q5_0(raw: np.ndarray) -> dict[str, np.ndarray]:
    """block_q5_0: d (float16), qh (32 bits: each weight's fifth bit), 16 bytes of nibbles (weight
    j in byte j's low nibble, weight j + 16 in its high one); w = d·(q − 16)."""
    d = _half(raw, 0)
    qh = np.ascontiguousarray(raw[:, 2:6]).view("<u4").astype(np.int64)  # (n, 1)
    nibbles = raw[:, 6:22].astype(np.int32)
    low = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=1)  # (n, 32): weights 0…15, 16…31
    fifth = (qh >> np.arange(32)) & 1  # bit j is weight j's
    q = low | (fifth.astype(np.int32) << 4)  # 0 … 31
    return {"d": np.broadcast_to(d, q.shape), "q": q, "w": d * (q - 16).astype(np.float32)}


def k_scales(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 12 bytes of a Q4_K / Q5_K super-block's 8 sub-block scales and 8 minimums, 6 bits each
    (ggml's get_scale_min_k4): sub-blocks 0–3 in the low 6 bits of bytes 0–3 (scales) and 4–7
    (minimums); sub-blocks 4–7 in the nibbles of bytes 8–11, their top two bits in the top two bits
    of bytes 0–3 and 4–7. Returns (n, 8) scales and (n, 8) minimums."""
    b = scales.astype(np.int32)  # (n, 12)
    sc = np.empty((b.shape[0], 8), dtype=np.int32)
    m = np.empty_like(sc)
    for j in range(4):
        sc[:, j], m[:, j] = b[:, j] & 63, b[:, j + 4] & 63
        sc[:, j + 4] = (b[:, j + 8] & 0x0F) | ((b[:, j] >> 6) << 4)
        m[:, j + 4] = (b[:, j + 8] >> 4) | ((b[:, j + 4] >> 6) << 4)
    return sc, m


def q4_k(raw: np.ndarray) -> dict[str, np.ndarray]:
    """block_q4_K: d, dmin (float16), 12 bytes of 6-bit scales and minimums, 128 bytes of nibbles:
    each 32 bytes hold two sub-blocks of 32 (the first in the low nibbles, the next in the high);
    w = (d·sc)·q − dmin·m, each product and the difference rounded to float32."""
    n = raw.shape[0]
    d, dmin = _half(raw, 0), _half(raw, 2)
    sc, m = k_scales(raw[:, 4:16])
    nibbles = raw[:, 16:144].astype(np.int32).reshape(n, 4, 1, 32)
    q = ((nibbles >> np.array([0, 4]).reshape(1, 1, 2, 1)) & 0x0F).reshape(n, QK_K)
    sc_w, m_w = np.repeat(sc, 32, axis=1), np.repeat(m, 32, axis=1)  # each weight's sub-block's
    w = (d * sc_w.astype(np.float32)) * q.astype(np.float32) - dmin * m_w.astype(np.float32)
    return {"d": np.broadcast_to(d, q.shape), "dmin": np.broadcast_to(dmin, q.shape),
            "sc": sc_w, "m": m_w, "q": q, "w": w}


def q6_k(raw: np.ndarray) -> dict[str, np.ndarray]:
    """block_q6_K: 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 signed 8-bit scales
    (one per sub-block of 16), d (float16). In each half of 128 weights, weight l + 32·t (t = 0…3)
    takes ql[l + 32·(t % 2)]'s low or high nibble and bits 2t, 2t + 1 of qh[l];
    w = (d·sc)·(q − 32) in float32."""
    n = raw.shape[0]
    ql = raw[:, 0:128].astype(np.int32).reshape(n, 2, 64)  # two halves of 128 weights
    qh = raw[:, 128:192].astype(np.int32).reshape(n, 2, 32)
    sc = raw[:, 192:208].view(np.int8).astype(np.int32)  # (n, 16)
    d = _half(raw, 208)
    q = np.empty((n, 2, 4, 32), dtype=np.int32)
    for t in range(4):
        low = ql[:, :, (t % 2) * 32:(t % 2) * 32 + 32] >> (4 * (t // 2)) & 0x0F
        q[:, :, t, :] = low | (((qh >> (2 * t)) & 0x03) << 4)
    q = q.reshape(n, QK_K)  # 0 … 63
    sc_w = np.repeat(sc, 16, axis=1)
    w = (d * sc_w.astype(np.float32)) * (q - 32).astype(np.float32)
    return {"d": np.broadcast_to(d, q.shape), "sc": sc_w, "q": q, "w": w}


READERS = {"Q8_0": q8_0, "Q5_0": q5_0, "Q4_K": q4_k, "Q6_K": q6_k}
