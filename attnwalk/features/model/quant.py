"""How a quantized weight becomes the number the layer multiplies by: the lines a Q, K, V or O
cell of a GGUF model adds under its dot product, for the first weight of that dot product
(W[1, col], the first entry of the column the cell printed).

A GGUF file stores each row of a weight (one output; one column of the lessons' W) in blocks along
its inputs: Q4_1 keeps 32 weights as a float16 scale d, a float16 minimum m and 32 four-bit
integers q, and the weight is d·q + m. The block's fields come from the model layer's `stored[W]`
(a models.quantblock.StoredWeight, duck-typed: the features import neither models nor gguf); its
numbers are printed whole (float16 values are short and exact), so the equation holds for every
digit.

Added by the model feature (__init__.py) under the Q, K, V and O cells, after the dot product.
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


def stored_weight(c: Cell, weight: str) -> list:
    """The block behind W[1, col] and its arithmetic; nothing for a model read from safetensors."""
    stored = getattr(c.scn.setting("model"), "stored", None)
    if not stored or weight not in stored:
        return []
    block = stored[weight].block(0, c.col)
    col = c.cols[c.col]
    cell = f"{weight}[1, {col}]"
    if block.q is None:  # a float type, or a layout not read apart here: the value as stored
        key = "quant.float" if block.formula == "w" else "quant.unread"
        return [c.prose(c.say(key, cell=cell, kind=block.kind, bits=_bits(stored[weight])))]
    where = f"{weight}[{span(block.first, block.first + block.size - 1, _dash(c))}, {col}]"
    lines = [c.prose(c.say(f"quant.{LAYOUT[block.kind]}", cell=cell, span=where, size=block.size,
                           sub=shown(block.sub or 0), sub_size=block.sub_size or block.size))]
    f, q = block.fields, block.q
    fields = ", ".join(f"{name} = {exact(value)}" for name, value in f.items())
    qs = ", ".join(str(v) for v in block.qs[:4]) + f", {c.mk.ellipsis}, " + ", ".join(str(v) for v in block.qs[-2:])
    lines.append(c.plain(f"{fields}; q = [{qs}]"))
    terms, result = _arithmetic(c, block.kind, f, q)
    lines.append(c.plain(f"{cell} = {block.formula} = {terms} = {exact(result)}"))
    return lines


def exact(x: float) -> str:
    """A stored number as it is: float16 scales and their products need no rounding (up to 8
    significant digits, which float32's results never exceed in what they mean)."""
    text = np.format_float_positional(float(x), precision=8, unique=True, fractional=False, trim="-")
    return text


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


def _bits(stored) -> str:
    return f"{stored.info.bits:g}"


def _dash(c: Cell) -> str:
    return "-" if c.mk.minus == "-" else "–"
