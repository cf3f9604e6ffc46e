"""A scenario's own W matrices quantized as llama.cpp stores a model's (`quantize: q4_1 | q8_0`):
each column of W (one output, one row of a GGUF tensor) cut into blocks along its inputs, each
block kept as float16 scales and a few-bit integer a weight, and read back into the number the
layer multiplies by.

    Q8_0   d = max|x| / 127 (float16),  q = round(x / d) in -128…127,   w = d·q
    Q4_1   d = (max − min) / 15, m = min (both float16),  q = round((x − m) / d) in 0…15,   w = d·q + m

Hand-written, though `gguf.quants` (the library llama.cpp publishes) does the same, because that
library is an optional extra and a lesson must run without it. It is written as gguf-py writes it,
in float32 with the same reciprocal and the same rounding, so that its numbers are the library's
bit for bit (tests/test_quantize_scenario.py checks that against gguf itself).

A block is 32 weights. A column shorter than 32 (a lesson's d_model is 2 to 8) is one block of its
own length, which llama.cpp would not write, and the text says so; a longer column that 32 does
not divide is refused (`block_size` is None).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

KINDS = ("q4_1", "q8_0")
BLOCK = 32  # ggml's QK4_1 and QK8_0
FORMULAS = {"Q4_1": "d·q + m", "Q8_0": "d·q"}
BITS = {"Q4_1": 4, "Q8_0": 8}
WEIGHTS = ("W_Q", "W_K", "W_V", "W_O")  # the matrices a layer multiplies by; never E, γ or β


class Quantization(NamedTuple):
    """A scenario's `quantize`: the type, and its weight matrices as written, before quantizing."""

    kind: str                         # "Q4_1" | "Q8_0"
    floats: Mapping[str, np.ndarray]  # "W_Q" … -> the float matrix (in × out)


@dataclass(frozen=True)
class Block:
    """One weight's block, as layer/quantcells.py shows it (and models/quantblock.Block)."""

    kind: str
    size: int                         # weights in the block
    first: int                        # the input (row of W, from 0) of its first weight
    index: int                        # this weight's place in the block, from 0
    fields: dict[str, float]          # "d" (and "m"): the float16 numbers stored, as floats
    q: int                            # this weight's integer
    qs: tuple[int, ...]               # every integer of the block
    value: float                      # d·q (+ m), as the layer multiplies by it
    formula: str
    sub: int | None = None            # (the K-quants' sub-blocks; none here)
    sub_size: int | None = None


def block_size(rows: int) -> int | None:
    """How many weights a block of a column `rows` long holds: 32, or all of a shorter column."""
    if rows < BLOCK:
        return rows
    return BLOCK if rows % BLOCK == 0 else None


def refusal(name: str, W: np.ndarray, kind: str) -> str | None:
    """Why weight matrix `name` (in × out, at float) cannot be quantized to `kind`, or None."""
    inputs = "h·d_v" if name == "W_O" else "d_model"
    if block_size(W.shape[0]) is None:
        return (f"{kind} cuts each column of {name} into blocks of {BLOCK}, but {name} has {W.shape[0]} rows "
                f"({inputs}); give {inputs} a multiple of {BLOCK}, or under {BLOCK} (one block a column)")
    with np.errstate(all="ignore"):  # d and m are float16: a scale past 65504 is inf, said below
        fits = np.isfinite(quantized(W, kind)).all()
    if not fits:
        return (f"{name} has a weight of {float(np.abs(W).max()):g}, too large for {kind}, whose block "
                "scales are float16 (at most 65504)")
    return None


def quantized(W: np.ndarray, kind: str) -> np.ndarray:
    """W (in × out) as the layer reads it back after quantizing to `kind`: float64 holding the
    float32 numbers gguf.quants.dequantize gives."""
    d, m, q = _stored(W, kind)
    back = d * q.astype(np.float32)  # (out, blocks, size), float32 as ggml computes it
    if kind.upper() == "Q4_1":  # Q8_0 adds nothing: + 0.0 would turn gguf's −0.0 (a scale that
        back = back + m  # underflowed float16 to 0, times a negative q) into +0.0
    return back.reshape(W.shape[1], W.shape[0]).T.astype(np.float64)


def block(W: np.ndarray, kind: str, i: int, j: int) -> Block:
    """The block behind W[i, j] (0-based): its stored fields and integers."""
    size = block_size(W.shape[0])
    b, k = divmod(i, size)
    d, m, q = _stored(W[b * size:(b + 1) * size, j:j + 1], kind)  # the one block
    kind = kind.upper()
    fields = {"d": float(d.ravel()[0])} | ({"m": float(m.ravel()[0])} if kind == "Q4_1" else {})
    qs = tuple(int(v) for v in q.ravel())
    value = float(quantized(W[b * size:(b + 1) * size, j:j + 1], kind)[k, 0])
    return Block(kind=kind, size=size, first=b * size, index=k, fields=fields, q=qs[k], qs=qs, value=value,
                 formula=FORMULAS[kind])


def _stored(W: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """W's blocks as stored: d and m (float16, as float32; m is 0 for Q8_0) and the integers,
    shaped (out, blocks, 1) and (out, blocks, size)."""
    size = block_size(W.shape[0])
    x = np.ascontiguousarray(W.T, dtype=np.float32).reshape(W.shape[1], -1, size)  # a GGUF row: one column
    if kind.upper() == "Q8_0":
        d = np.abs(x).max(axis=-1, keepdims=True) / np.float32(127)
        q = _roundf(x * _reciprocal(d)).astype(np.int8)
        return d.astype(np.float16).astype(np.float32), np.float32(0), q
    low = x.min(axis=-1, keepdims=True)
    d = (x.max(axis=-1, keepdims=True) - low) / np.float32(15)
    # ggml: (x − min)·(1/d) + 0.5, truncated; clipped to the four bits
    q = np.trunc((x - low) * _reciprocal(d) + np.float32(0.5)).astype(np.uint8).clip(0, 15)
    return d.astype(np.float16).astype(np.float32), low.astype(np.float16).astype(np.float32), q


def _reciprocal(d: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):  # a block of one value (d = 0) stores q = 0
        return np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)


def _roundf(x: np.ndarray) -> np.ndarray:
    # C's roundf, half away from zero, in the steps gguf-py takes, so the bits agree at a half
    a = np.abs(x)
    whole = np.floor(a)
    return np.sign(x) * (whole + np.floor(2 * (a - whole)))
