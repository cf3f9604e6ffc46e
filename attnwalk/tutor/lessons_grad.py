"""The numbers of the gradient lessons' own questions (tutor/lessonquiz.py asks them): backprop and
saturation. As lessons_core.py: a function of the walk returning the values its text needs, or
None where the walk no longer shows the lesson's point.
"""

from __future__ import annotations

import math

import numpy as np

from attnwalk.layer.axes import token_labels
from attnwalk.layer.walk import Walk, with_mode
from attnwalk.tutor.lessons_core import focus, n2, n4, vec
from attnwalk.numbering import shown


def _grads(w: Walk):
    from attnwalk.layer.train import gradients

    return gradients(w)


def _asked(w: Walk) -> tuple[int, int] | None:
    target = w.scenario.settings.get("target")
    return target.pairs[0] if target is not None and target.kind == "attend" else None


def backprop_moves(w: Walk) -> dict | None:
    """Which row of W_Q moves most: the one where the asking token's embedding is largest."""
    pair = _asked(w)
    if pair is None:
        return None
    g = _grads(w).params["W_Q"]  # (d_model, d_k)
    row, col = np.unravel_index(int(np.argmax(np.abs(g))), g.shape)
    tokens = token_labels(w.scenario.tokens)
    x = w.mats["X"][pair[0]]
    return {"row": tokens[pair[0]], "col": tokens[pair[1]], "dim": shown(row), "x": vec(x),
            "weight": n4(g[row, col]), "most": n2(x[row])}


def backprop_key(w: Walk) -> dict | None:
    """Which way river's key moves: toward bank's query (its gradient is −c · q_bank)."""
    pair = _asked(w)
    if pair is None:
        return None
    grads = _grads(w)
    q, k = pair
    tokens, keys = token_labels(w.scenario.tokens), token_labels(w.scenario.key_tokens)
    return {"row": tokens[q], "col": keys[k], "q": vec(w.heads[0].mats["Q"][q]),
            "k": vec(w.heads[0].mats["K"][k]), "g": vec(grads.heads[0]["K"][k], n4),
            "ds": n4(grads.heads[0]["S"][q, k])}


def saturation_spread(w: Walk) -> dict | None:
    d_k = w.scenario.d_k
    if w.scenario.heads != 1 or d_k < 16:
        return None
    root = math.sqrt(d_k)
    return {"dk": d_k, "root": f"{root:g}"}


def saturation_signal(w: Walk) -> dict | None:
    """The focus row's largest unscaled weight and its learning signal a(1 − a)."""
    r = focus(w)
    A = with_mode(w, "unscaled").matrix("A")
    top = int(np.argmax(A[r]))
    a = float(A[r, top])
    signal = a * (1.0 - a)
    if signal > 1e-3:  # not saturated: no point to make
        return None
    keys = token_labels(w.scenario.key_tokens)
    return {"row": token_labels(w.scenario.tokens)[r], "col": keys[top], "a": f"{a:.6f}",
            "signal": f"{signal:.1e}", "scaled": n2(w.matrix("A")[r, top])}
