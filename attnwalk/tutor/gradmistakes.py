"""What a learner's wrong answer to a gradient cell would be if they made one of the known mistakes
(the forward cells' are in mistakes.py), recomputed with the layer's own backward pass:

    missing_term   the softmax Jacobian's rowsum term dropped: ∂L/∂S = A ⊙ ∂L/∂A, passed back
                   through the rest of the graph as the layer passes ∂L/∂S
    sign_flipped   −∂L/∂W: the step's direction taken for the gradient
    no_scale       the gradient of the unscaled layer (the scaled one's, for an unscaled walk:
                   scaled_anyway)
    transposed     the cell across the diagonal of a square gradient
    rounded        the cell's dot product from its two vectors rounded to one decimal place
    neighbour_row, neighbour_col   slips, as for a forward cell

Pure: no text, no printing.
"""

from __future__ import annotations

import functools

import numpy as np

from attnwalk.layer.backward import backward
from attnwalk.layer.stages import stage_named
from attnwalk.tutor.mistakes import EXACT_ONLY, ROUND, in_mode


def grad_candidates(walk, key: str, param: str, row: int, col: int,
                    x: np.ndarray, g: np.ndarray) -> list[tuple[str, float]]:
    """(name, value) of each mistake for cell (row, col) of gradient screen `key` (the gradient of
    parameter `param`, a GradWalk's), whose value is x · g. A misconception that gives the right
    number is kept (the cell is then not asked, quiz.fair); a slip that does is dropped."""
    M = walk.matrix(key)
    right = float(M[row, col])
    fwd = walk.forward
    out = [("sign_flipped", -right)]
    missing = _missing_term(walk)
    if missing is not None and param in missing:
        out.append(("missing_term", float(missing[param][row, col])))
    if fwd.mode.reads_scores and fwd.mode.smooth and (fwd.scale != 1.0 or fwd.scenario.scorer.divides):
        name, mode = ("no_scale", "unscaled") if fwd.scale != 1.0 else ("scaled_anyway", "scaled")
        other = _params(fwd, mode).get(param)
        if other is not None:
            out.append((name, float(other[row, col])))
    if M.shape[0] == M.shape[1] and row != col:
        out.append(("transposed", float(M[col, row])))
    out.append(("rounded", float(np.round(x, ROUND) @ np.round(g, ROUND))))
    out += [("neighbour_row", float(M[r, col])) for r in (row - 1, row + 1) if 0 <= r < M.shape[0]]
    out += [("neighbour_col", float(M[row, c])) for c in (col - 1, col + 1) if 0 <= c < M.shape[1]]
    return [(name, v) for name, v in out if np.isfinite(v) and (name not in EXACT_ONLY or abs(v - right) > 1e-12)]


@functools.lru_cache(maxsize=8)  # a prediction tries up to 32 cells of one walk
def _params(fwd, mode: str) -> dict[str, np.ndarray]:
    """Every parameter's gradient of `fwd`'s layer under another mode."""
    from attnwalk.layer.train import gradients

    return gradients(in_mode(fwd, mode)).params


@functools.lru_cache(maxsize=8)
def _missing_term(walk) -> dict[str, np.ndarray] | None:
    """Every parameter's gradient had the softmax passed back A ⊙ ∂L/∂A alone, or None where the
    weights are not a softmax of the scores."""
    fwd, grads = walk.forward, walk.grads
    if fwd is None or grads is None or not (fwd.mode.smooth and fwd.mode.reads_scores):
        return None
    read = stage_named("A", fwd.scenario.graph).reads[0]  # the scores the softmax reads
    seeds = {}
    for h in range(fwd.scenario.heads):
        dA = grads.heads[h].get("A")
        if dA is None:
            return None
        seeds[(read, h)] = fwd.heads[h].mats["A"] * dA  # (n, m): the rowsum term left out
    return backward(fwd, seeds, grads.loss).params
