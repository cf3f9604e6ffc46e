"""How a quantized weight becomes the number the layer multiplies by: the lines a Q, K, V or O
cell of a GGUF model adds under its dot product, for the first weight of that dot product
(W[1, col], the first entry of the column the cell printed).

A GGUF file stores each row of a weight (one output; one column of the lessons' W) in blocks along
its inputs: Q4_1 keeps 32 weights as a float16 scale d, a float16 minimum m and 32 four-bit
integers q, and the weight is d·q + m. The block's fields come from the model layer's `stored[W]`
(a models.quantblock.StoredWeight, duck-typed: the features import neither models nor gguf); the
lines are layer/quantcells.py's, as for a scenario's own `quantize`.

Added by the model feature (__init__.py) under the Q, K, V and O cells, after the dot product.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnwalk.layer.quantcells import block_lines

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell


def stored_weight(c: Cell, weight: str) -> list:
    """The block behind W[1, col] and its arithmetic; nothing for a model read from safetensors."""
    stored = getattr(c.scn.setting("model"), "stored", None)
    if not stored or weight not in stored:
        return []
    block = stored[weight].block(0, c.col)
    if block.q is None:  # a float type, or a layout not read apart here: the value as stored
        key = "quant.float" if block.formula == "w" else "quant.unread"
        return [c.prose(c.say(key, cell=f"{weight}[1, {c.cols[c.col]}]", kind=block.kind,
                              bits=f"{stored[weight].info.bits:g}"))]
    return block_lines(c, weight, block)
