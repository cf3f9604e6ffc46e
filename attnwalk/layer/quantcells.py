"""How a quantized weight becomes the number the layer multiplies by, as a worked cell shows it:
the sentence that says how its block stores it, the block's fields and integers, and the weight's
own arithmetic (w = d·q + m for Q4_1, w = d·q for Q8_0, the K-quants' super-block scales).

Shared by a GGUF model's weights (features/model/quant.py, the block read from the file) and a
scenario's `quantize` (features/quantize.py, the block made by layer/quants.py): a block is
duck-typed (kind, size, first, fields, q, qs, sub, sub_size, formula). Its numbers are printed
whole (float16 values are short and exact), so the equation holds for every digit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attnwalk.numbering import shown, span

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell

# each type's layout, for the sentence that says how the block stores its weights
LAYOUT = {"Q4_0": "q4_0", "Q4_1": "q4_1", "Q5_0": "q5_0", "Q5_1": "q5_1", "Q8_0": "q8_0",
          "Q4_K": "q4_k", "Q5_K": "q5_k", "Q6_K": "q6_k"}


def block_lines(c: Cell, weight: str, block) -> list:
    """The block behind W[1, col] (`block`, a quantized type's) and the weight's arithmetic."""
    col = c.cols[c.col]
    cell = f"{weight}[{shown(block.first + block.index)}, {col}]"
    where = f"{weight}[{span(block.first, block.first + block.size - 1, _dash(c))}, {col}]"
    lines = [c.prose(c.say(f"quant.{LAYOUT[block.kind]}", cell=cell, span=where, size=block.size,
                           sub=shown(block.sub or 0), sub_size=block.sub_size or block.size))]
    f, q = block.fields, block.q
    fields = ", ".join(f"{name} = {exact(value)}" for name, value in f.items())
    lines.append(c.plain(f"{fields}; q = [{_integers(c, block.qs)}]"))
    terms, result = _arithmetic(c, block.kind, f, q)
    stored = getattr(block, "value", None)  # the number the walk multiplies by (gguf's float32)
    # every product here is exact in float32; Q4_K's difference may not be, and is rounded to it
    rounded = (f" {c.mk.arrow} {exact(stored)} (float32)"
               if block.kind in ("Q4_K", "Q5_K") and stored is not None and stored != result else "")
    lines.append(c.plain(f"{cell} = {block.formula} = {terms} = {exact(result)}{rounded}"))
    return lines


def exact(x: float) -> str:
    """A stored number as it is: float16 scales and their products need no rounding (up to 8
    significant digits, which float32's results never exceed in what they mean)."""
    return np.format_float_positional(float(x), precision=8, unique=True, fractional=False, trim="-")


def _integers(c: Cell, qs) -> str:
    if len(qs) <= 8:  # a lesson's short block: every integer
        return ", ".join(str(v) for v in qs)
    return ", ".join(str(v) for v in qs[:4]) + f", {c.mk.ellipsis}, " + ", ".join(str(v) for v in qs[-2:])


def _arithmetic(c: Cell, kind: str, f: dict[str, float], q: int) -> tuple[str, float]:
    t, minus = c.mk.times, c.mk.minus
    op = lambda x: f"({exact(x)})" if x < 0 else exact(x)  # noqa: E731
    if kind in ("Q4_1", "Q5_1"):
        return f"{exact(f['d'])} {t} {q} + {op(f['m'])}", f["d"] * q + f["m"]
    if kind == "Q8_0":
        return f"{exact(f['d'])} {t} {op(q)}", f["d"] * q
    if kind in ("Q4_0", "Q5_0", "Q6_K"):
        zero = {"Q4_0": 8, "Q5_0": 16, "Q6_K": 32}[kind]
        scale = f["d"] if kind != "Q6_K" else f["d"] * f["sc"]
        head = exact(f["d"]) if kind != "Q6_K" else f"{exact(f['d'])} {t} {op(f['sc'])}"
        return f"{head} {t} ({q} {minus} {zero})", scale * (q - zero)
    # Q4_K, Q5_K: the super-block's d and dmin times the sub-block's 6-bit scale and minimum
    return (f"{exact(f['d'])} {t} {exact(f['sc'])} {t} {q} {minus} {exact(f['dmin'])} {t} {exact(f['m'])}",
            f["d"] * f["sc"] * q - f["dmin"] * f["m"])


def _dash(c: Cell) -> str:
    return "-" if c.mk.minus == "-" else "–"
