"""Seeded random matrices: `W_Q: {random: {seed: 1, rows: 512, cols: 512, scale: 0.044}}`.

A real-size layer (d_model 512, 8 heads) has a million weights: too many to type into YAML and
too many to ship. Its numbers rarely matter to the lesson, only its shapes do, so a scenario may
ask for any matrix as normal(0, scale) numbers from numpy's PCG64 generator seeded with `seed`:
the same seed and shape give the same numbers every time. The usual choice for weights is
scale = 1/√d_model, which keeps Q, K and V entries near unit size when X's entries are.
"""

from __future__ import annotations

import numpy as np

from attnwalk.reading.fields import Fields, whole
from attnwalk.scenario.limits import MAX_MATRIX
from attnwalk.reading.yamltree import Node

KEYS = ("seed", "rows", "cols", "scale")
MAX_VALUES = MAX_MATRIX  # 2048 × 2048, 32 MB of float64: beyond any lesson, and still quick
MAX_SEED = 2**63 - 1


def random_matrix(fields: Fields, node: Node, field: str) -> np.ndarray:
    """The matrix that `{random: {seed, rows, cols, scale}}` at `node` asks for (rows × cols)."""
    outer = fields.mapping(node, field, ("random",), ("random",))
    where = f"{field}.random"
    spec = fields.mapping(outer["random"], where, KEYS, ("seed", "rows", "cols"))
    seed = fields.integer(spec["seed"], f"{where}.seed", minimum=0)
    if seed > MAX_SEED:
        raise fields.error(f"{where}.seed", spec["seed"], f"seed is {whole(seed)}; give a whole number "
                           f"from 0 to {MAX_SEED}")
    rows = fields.integer(spec["rows"], f"{where}.rows", minimum=1)
    cols = fields.integer(spec["cols"], f"{where}.cols", minimum=1)
    if rows * cols > MAX_VALUES:
        total = f"{rows * cols:,}" if rows * cols < 10**15 else whole(rows * cols)
        raise fields.error(where, outer["random"], f"{whole(rows)} × {whole(cols)} is {total} numbers, "
                           f"more than the {MAX_VALUES:,} a random matrix may hold; use a .npy "
                           "file for bigger weights")
    scale = 1.0
    if "scale" in spec:
        scale = fields.number(spec["scale"], f"{where}.scale")
        if scale < 0:
            raise fields.error(f"{where}.scale", spec["scale"], f"scale is {scale:g}; give the "
                               "standard deviation, a number ≥ 0")
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, scale, size=(rows, cols))  # (rows, cols) float64
