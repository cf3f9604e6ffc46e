"""The numbers of the variant lessons' own questions (tutor/lessonquiz.py asks them): rope, alibi,
sliding_window, grouped_query, online_softmax, kv_cache and shapes. As lessons_core.py: a function
of the walk returning the values its text needs, or None.
"""

from __future__ import annotations

import math

import numpy as np

from attnwalk.layer.axes import token_labels
from attnwalk.layer.walk import Walk
from attnwalk.tutor.lessons_core import focus, n2, n4, vec
from attnwalk.numbering import span


def rope_offset(w: Walk) -> dict | None:
    QK = w.heads[0].mats["QK^T"]
    return {"back": n2(QK[1, 0]), "diagonal": n2(QK[0, 0]), "two": n2(QK[2, 0])}


def rope_twins(w: Walk) -> dict | None:
    E, t = w.mats["E"], w.scenario.tokens
    for i in range(w.scenario.n):
        for j in range(i + 1, w.scenario.n):
            if t[i] == t[j] and np.array_equal(E[i], E[j]):
                labels = token_labels(t)
                return {"token": t[i], "a": labels[i], "b": labels[j], "pa": i, "pb": j}
    return None


def alibi_far(w: Walk) -> dict | None:
    from attnwalk.layer.alibi import slopes

    r = focus(w)
    S, t = w.heads[0].mats["S"], token_labels(w.scenario.tokens)
    hits = sorted((j for j in range(r) if S[r, j] > 0), key=lambda j: j)
    if len(hits) < 2:
        return None
    far, near = hits[0], hits[-1]
    m = float(slopes(w.scenario.heads)[0])
    return {"slope": n4(m), "row": t[r], "far": t[far], "near": t[near], "df": r - far, "dn": r - near,
            "pf": n2(m * (r - far)), "pn": n2(m * (r - near))}


def alibi_heads(w: Walk) -> dict | None:
    from attnwalk.layer.alibi import slopes

    r, h = focus(w), w.scenario.heads
    t = token_labels(w.scenario.tokens)
    first, last = int(np.argmax(w.matrix("A", 0)[r])), int(np.argmax(w.matrix("A", h - 1)[r]))
    if first == last:
        return None
    m = slopes(h)
    return {"row": t[r], "first": t[first], "last": t[last], "heads": h, "m1": n4(m[0]), "mh": n4(m[-1])}


def window_dropped(w: Walk) -> dict | None:
    r = focus(w)
    S, ok, t = w.heads[0].mats["S"], w.scenario.allowed, token_labels(w.scenario.tokens)
    top = int(np.argmax(S[r]))
    if ok[r, top]:
        return None
    return {"row": t[r], "col": t[top], "s": n4(S[r, top]), "back": r - top, "w": w.scenario.window}


def window_later(w: Walk) -> dict | None:
    r = focus(w)
    S, ok, t = w.heads[0].mats["S"], w.scenario.allowed, token_labels(w.scenario.tokens)
    top = int(np.argmax(S[r]))
    width = w.scenario.window
    if ok[r, top] or width < 2:
        return None
    return {"row": t[r], "col": t[top], "w": width, "step": width - 1, "layers": math.ceil((r - top) / (width - 1)),
            "back": r - top}


def gqa_same_kv(w: Walk) -> dict | None:
    r, scn = focus(w), w.scenario
    t = token_labels(scn.tokens)
    pairs = [(a, b) for a in range(scn.heads) for b in range(a + 1, scn.heads) if scn.kv_head(a) == scn.kv_head(b)]
    for a, b in pairs:
        ta, tb = int(np.argmax(w.matrix("A", a)[r])), int(np.argmax(w.matrix("A", b)[r]))
        if ta != tb:
            return {"row": t[r], "ha": a + 1, "hb": b + 1, "ca": t[ta], "cb": t[tb]}
    return None


def gqa_saves(w: Walk) -> dict | None:
    scn = w.scenario
    shared, own = scn.groups * (scn.d_k + scn.d_v), scn.heads * (scn.d_k + scn.d_v)
    return {"shared": shared, "own": own, "g": scn.groups, "h": scn.heads, "d": scn.d_k, "keys": shared // 2}


def _tiled_row(w: Walk):
    from attnwalk.layer.tiledcells import head_steps

    r = focus(w)
    return r, head_steps(w, 0, r)


def online_alpha(w: Walk) -> dict | None:
    r, steps = _tiled_row(w)
    b = next((b for b in range(1, len(steps)) if steps[b].alpha[0] < 1.0), None)
    if b is None:
        return None
    s = steps[b]
    return {"row": token_labels(w.scenario.tokens)[r], "block": b + 1, "before": b, "m_old": n4(s.m_old[0]),
            "l_old": n4(s.l_old[0]), "m": n4(s.m[0]), "alpha": n4(s.alpha[0])}


def online_steady(w: Walk) -> dict | None:
    r, steps = _tiled_row(w)
    b = next((b for b in range(1, len(steps)) if steps[b].alpha[0] == 1.0 and np.isfinite(steps[b].block_max[0])), None)
    if b is None:
        return None
    s = steps[b]
    return {"row": token_labels(w.scenario.tokens)[r], "block": b + 1, "scores": vec(s.scores[0]),
            "m": n4(s.m[0]), "top": n4(s.block_max[0]), "wrong": n4(math.exp(s.block_max[0] - s.m[0]))}


def cache_saves(w: Walk) -> dict | None:
    from attnwalk.layer.kvcache import cached_work, refusal, rerun_work

    scn = w.scenario
    if refusal(scn) is not None:
        return None
    cached = sum(cached_work(scn, t).total for t in range(1, scn.n + 1))
    rerun = sum(rerun_work(scn, t).total for t in range(1, scn.n + 1))
    return {"n": scn.n, "cached": f"{cached:,}", "rerun": f"{rerun:,}"}


def cache_exact(w: Walk) -> dict | None:
    t = token_labels(w.scenario.tokens)
    return {"first": t[0], "n": w.scenario.n}


def shapes_scores(w: Walk) -> dict | None:
    scn = w.scenario
    return {"n": scn.n, "heads": scn.heads, "d_model": scn.d_model, "big": 2 * scn.d_model,
            "d_big": 2 * scn.d_model // scn.heads}


def shapes_concat(w: Walk) -> dict | None:
    scn = w.scenario
    return {"n": scn.n, "heads": scn.heads, "d_v": scn.d_v, "width": scn.heads * scn.d_v,
            "second": span(scn.d_v, 2 * scn.d_v - 1), "stacked": scn.n * scn.heads}



