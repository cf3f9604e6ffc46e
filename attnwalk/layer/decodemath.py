"""A decode step's arithmetic, written from the layer's graph as decoding computes it.

Each stage's `step` writes its row t from the rows of what it reads (Q's: "x_t · W_Q"; RoPE's
Q_rot turns that: "R(t−1) · x_t · W_Q"; a norm's LN: "LN(x_t)"), so a feature that adds or
reroutes a stage changes these lines with no code here. Rows are written inline through the
graph; the vectors a decoder names are x_t (the layer's input), q_t, k_t and v_t (what the scores
and Z read), a_t and z_t. The keys a step reads are read off the scenario's mask.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attnwalk.layer.graph import get, needed

if TYPE_CHECKING:
    from attnwalk.layer.modes import Mode
    from attnwalk.scenario.scenario import Scenario


def rows(scn: Scenario, mode: Mode) -> dict[str, str]:
    """Stage key -> its row t written from the named vectors (x_t, q_t, k_t, v_t, a_t)."""
    graph = scn.graph
    scores, z = get(graph, "QK^T"), get(graph, "Z")
    names = {"X": "x_t", scores.reads[0]: "q_t", scores.keys[0]: "k_t", z.keys[0]: "v_t", "A": "a_t"}
    written: dict[str, str] = {}
    for stage in needed(graph, ["Z"]):
        if stage.step is None:
            continue
        inputs = [names.get(r) if r in names and r != stage.key else written.get(r, f"{r.lower()}_t")
                  for r in stage.reads]
        written[stage.key] = stage.step(scn, mode, *inputs)
    return written


def keys_read(scn: Scenario) -> str:
    """Which cached keys step t reads, from the mask itself: all of them, the last w, or those the
    mask allows (decoding is refused for a mask that lets a query read a later key)."""
    allowed = scn.allowed  # (n, n) bool
    n = allowed.shape[0]
    rows, cols = np.indices((n, n))
    if np.array_equal(allowed, cols <= rows):
        return "j = 1 … t"
    w = int(allowed.sum(axis=1).max())
    if np.array_equal(allowed, (cols <= rows) & (cols > rows - w)):
        return f"j = max(1, t − {w - 1}) … t"
    return "j ≤ t where the mask allows"


def step_lines(scn: Scenario, mode: Mode) -> list[str]:
    """One decode step in three lines: the new token's x, q, k, v; the caches growing by a row;
    its weights over the cached keys and its output."""
    row = rows(scn, mode)
    graph = scn.graph
    scores, z = get(graph, "QK^T"), get(graph, "Z")
    q, k, v = scores.reads[0], scores.keys[0], z.keys[0]
    cache = "K_cache ← [K_cache; k_t],  V_cache ← [V_cache; v_t]"
    if scn.groups < scn.heads:  # one cache per K/V head g, read by the query heads of its group
        cache = f"K_cache_g ← [K_cache_g; k_t,g],  V_cache_g ← [V_cache_g; v_t,g]  (g = 1 … {scn.groups})"
    return [f"x_t = {row['X']};  q_t = {row[q]},  k_t = {row[k]},  v_t = {row[v]}",
            cache,
            f"a_t = {row['A']}  ({keys_read(scn)});  z_t = {row['Z']}"]


def group(expr: str) -> str:
    """`expr` in brackets where a sum at its top level would otherwise bind wrongly."""
    depth = 0
    for i, ch in enumerate(expr):
        depth += ch == "(" or ch == "["
        depth -= ch == ")" or ch == "]"
        if depth == 0 and expr[i:i + 3] in (" + ", " − "):
            return f"({expr})"
    return expr


def row_name(symbol: str) -> str:
    """A stage's row t as a decoder names it, from the stage's symbol: each matrix letter in lower
    case with _t (S + B -> s_t + b_t; a feature's 2S+1 -> 2s_t+1)."""
    import re

    return re.sub(r"(?<![A-Za-z_])([A-Z])(?![A-Za-z_])", lambda m: f"{m.group(1).lower()}_t", symbol)
