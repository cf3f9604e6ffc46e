"""How one quantized weight is stored: its block's bytes read apart into the numbers that make it
(the scales, the minimum, each weight's few-bit q), for the worked cell that shows w = d·q + m.

The weight's value itself always comes from `gguf.quants.dequantize` (the walk multiplies by
nothing else); this module only reads the block's fields, in the layouts ggml defines
(ggml-common.h: block_q4_1 is d, m, then 16 bytes holding 32 nibbles), and `block` checks that
its fields give back the library's value before they are shown. Q8_0, Q5_0, Q4_K and Q6_K are
read by kquants.py, whose float32 arithmetic gives the library's value bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnwalk.models import kquants
from attnwalk.models.ggufile import TensorInfo

# each type's equation, in the names its fields are given below
FORMULAS = {"Q4_0": "d·(q − 8)", "Q5_0": "d·(q − 16)", "Q8_0": "d·q", "Q4_1": "d·q + m",
            "Q5_1": "d·q + m", "Q4_K": "d·sc·q − dmin·m", "Q5_K": "d·sc·q − dmin·m",
            "Q6_K": "d·sc·(q − 32)", "F32": "w", "F16": "w", "BF16": "w"}
FLOATS = ("F32", "F16", "BF16", "F64")


@dataclass(frozen=True)
class Block:
    """One weight's block: which block, where the weight sits in it, its fields and q."""

    kind: str                         # "Q4_1"
    size: int                         # weights in the block (32; 256 for the K-quants' super-block)
    index: int                        # this weight's place in the block, from 0
    first: int                        # the layer's row (an input dimension) of the block's first weight
    fields: dict[str, float]          # "d", "m" (Q4_1); "d", "dmin", "sc", "m" (K-quants: its sub-block's)
    q: int | None                     # the weight's stored integer; None for the float types
    qs: tuple[int, ...]               # every q of the block (K-quants: of its sub-block)
    sub: int | None                   # K-quants: the sub-block (from 0) and its size
    sub_size: int | None
    value: float                      # the weight as gguf.quants dequantizes it
    formula: str | None               # None where the layout is not read apart here


@dataclass(frozen=True)
class StoredWeight:
    """One weight matrix as the file stores it. The layer's W is in × out; the file's tensor is
    out × in, each row (one output) cut into blocks along the inputs: W[i, j] is weight i of the
    file's row rows[j]."""

    info: TensorInfo
    raw: np.ndarray                   # (out rows, bytes a row), a view of the file
    rows: np.ndarray                  # the layer's column j -> the file's row

    @property
    def kind(self) -> str:
        return self.info.kind

    def block(self, i: int, j: int) -> Block:
        info = self.info
        size = info.block_size
        b, k = divmod(i, size)
        raw = self.raw[int(self.rows[j]), b * info.type_size:(b + 1) * info.type_size]
        value = float(_dequantize(raw, info.type_id)[k])
        read = _LAYOUTS.get(info.kind)
        fields, qs, sub, sub_size = read(raw, k) if read else ({}, (), None, None)
        formula = FORMULAS.get(info.kind) if read or info.kind in FLOATS or info.kind in kquants.READERS else None
        q = None
        if info.kind in kquants.READERS:  # read apart here, and worked out bit for bit as gguf does
            fields, qs, sub, sub_size, own = _read_own(info.kind, raw, k)
            q = qs[k % sub_size] if sub_size else qs[k]
            if own != value:
                fields, qs, q, formula = {}, (), None, None  # never show fields that disagree
        elif qs:
            q = qs[k % sub_size] if sub_size else qs[k]
            # the library rounds each product to float32: agree to that, relative to the terms' size
            scale = sum(abs(v) for v in fields.values()) * (abs(q) + 32)
            if abs(_evaluate(info.kind, fields, q) - value) > 1e-6 * scale:
                fields, qs, q, formula = {}, (), None, None  # never show fields that disagree
        return Block(kind=info.kind, size=size, index=k, first=b * size, fields=fields, q=q, qs=tuple(qs),
                     sub=sub, sub_size=sub_size, value=value, formula=formula)


def _read_own(kind: str, raw: np.ndarray, k: int):
    """(fields, the q of the weight's sub-block or block, sub, sub_size, w) from kquants.py."""
    read = kquants.READERS[kind](raw[None, :])  # each field per weight, (1, block)
    names = {"Q8_0": ("d",), "Q5_0": ("d",), "Q4_K": ("d", "dmin", "sc", "m"), "Q6_K": ("d", "sc")}[kind]
    fields = {name: float(read[name][0, k]) for name in names}
    sub_size = {"Q4_K": 32, "Q6_K": 16}.get(kind)
    start = k - k % sub_size if sub_size else 0
    qs = [int(v) for v in read["q"][0, start:start + (sub_size or read["q"].shape[1])]]
    return fields, qs, None if sub_size is None else k // sub_size, sub_size, float(read["w"][0, k])


def _dequantize(raw: np.ndarray, type_id: int) -> np.ndarray:
    import gguf  # the optional extra: a StoredWeight exists only when a GGUF file was read

    return np.asarray(gguf.quants.dequantize(raw[None, :], type_id), dtype=np.float64).ravel()


def _evaluate(kind: str, f: dict[str, float], q: int) -> float:
    """The type's equation on the fields as read (float64): what the cell will show."""
    return {"Q4_0": lambda: f["d"] * (q - 8), "Q5_0": lambda: f["d"] * (q - 16),
            "Q8_0": lambda: f["d"] * q, "Q4_1": lambda: f["d"] * q + f["m"],
            "Q5_1": lambda: f["d"] * q + f["m"],
            "Q4_K": lambda: f["d"] * f["sc"] * q - f["dmin"] * f["m"],
            "Q5_K": lambda: f["d"] * f["sc"] * q - f["dmin"] * f["m"],
            "Q6_K": lambda: f["d"] * f["sc"] * (q - 32)}[kind]()


def _half(raw: np.ndarray, at: int) -> float:
    return float(raw[at:at + 2].view(np.float16)[0])


def _nibbles(qs: np.ndarray) -> list[int]:
    # 32 weights in 16 bytes: weight k < 16 in byte k's low nibble, weight k + 16 in its high one
    return [int(b) & 0x0F for b in qs] + [int(b) >> 4 for b in qs]


def _q4_0(raw, k):
    return {"d": _half(raw, 0)}, _nibbles(raw[2:18]), None, None


def _q4_1(raw, k):
    return {"d": _half(raw, 0), "m": _half(raw, 2)}, _nibbles(raw[4:20]), None, None


def _fifth_bits(qh: np.ndarray, low: list[int]) -> list[int]:
    high = int(qh.view("<u4")[0])  # bit k is weight k's fifth bit
    return [q | (((high >> k) & 1) << 4) for k, q in enumerate(low)]


def _q5_1(raw, k):
    return {"d": _half(raw, 0), "m": _half(raw, 2)}, _fifth_bits(raw[4:8], _nibbles(raw[8:24])), None, None


def _q5_k(raw, k):
    j = k // 32
    sc, m = (v.ravel() for v in kquants.k_scales(raw[None, 4:16]))
    qh = raw[16:48]  # bit j of byte t: sub-block j's weight t's fifth bit
    chunk = raw[48 + (j // 2) * 32:48 + (j // 2 + 1) * 32]
    qs = [((int(b) >> (4 * (j % 2))) & 0x0F) | (((int(qh[t]) >> j) & 1) << 4) for t, b in enumerate(chunk)]
    return ({"d": _half(raw, 0), "dmin": _half(raw, 2), "sc": float(sc[j]), "m": float(m[j])},
            qs, j, 32)


_LAYOUTS = {"Q4_0": _q4_0, "Q4_1": _q4_1, "Q5_1": _q5_1, "Q5_K": _q5_k}  # and kquants.READERS
