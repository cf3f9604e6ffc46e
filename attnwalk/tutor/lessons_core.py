"""The numbers of the core lessons' own questions (tutor/lessonquiz.py asks them): each function
reads the walk and returns the values its text needs, or None where the walk no longer shows the
lesson's point. girl_bangs to cross_attention and word_order; the variants' are in
lessons_variants.py. The small formatters here write numbers as the lessons' prose does.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from attnwalk.layer.axes import token_labels
from attnwalk.layer.walk import Walk, compute
from attnwalk.render.options import ViewOptions
from attnwalk.render.style import short

_TWO = ViewOptions(precision=2)
_FOUR = ViewOptions(precision=4)


def n2(x: float) -> str:
    """A number as the lessons write it in prose: at most two decimals, no trailing zeros."""
    return short(float(x), _TWO)


def n4(x: float) -> str:
    return short(float(x), _FOUR)


def vec(values, digits: Callable[[float], str] = n2) -> str:
    return "[" + ", ".join(digits(v) for v in values) + "]"


def pct(x: float) -> str:
    return f"{round(100 * float(x))}%"


def focus(w: Walk) -> int:
    return w.scenario.focus if w.scenario.focus is not None else w.scenario.n - 1



def girl_asymmetry(w: Walk) -> dict | None:
    t, QK = token_labels(w.scenario.tokens), w.heads[0].mats["QK^T"]
    i, j = 0, w.scenario.n - 1
    return {"a": t[i], "b": t[j], "ab": n4(QK[i, j]), "ba": n4(QK[j, i])}


def girl_positions(w: Walk) -> dict | None:
    if w.scenario.main.positional != "sinusoidal":
        return None
    t = token_labels(w.scenario.tokens)
    return {"token": t[0], "e": vec(w.mats["E"][0]), "x": vec(w.mats["X"][0]), "p": vec(w.mats["P"][0])}


def causal_tie(w: Walk) -> dict | None:
    S, ok = w.heads[0].mats["S"], w.scenario.allowed
    t = token_labels(w.scenario.tokens)
    for r in range(w.scenario.n):
        for c in np.flatnonzero(~ok[r]):
            if S[r, c] >= S[r][ok[r]].max() - 1e-12:
                return {"row": t[r], "col": t[c], "s": n4(S[r, c]), "own": t[int(np.argmax(np.where(ok[r], S[r], -np.inf)))]}
    return None


def causal_reversed(w: Walk) -> dict | None:
    from attnwalk.scenario.variant import swapped

    scn = w.scenario
    last = scn.n - 1
    other = compute(swapped(scn, 0, last), w.mode)
    t = token_labels(scn.tokens)
    return {"last": t[last], "first": t[0], "v": vec(w.heads[0].mats["V"][last]),
            "z": vec(w.matrix("Z")[last], n4), "then": vec(other.matrix("Z")[0])}


def river_match(w: Walk) -> dict | None:
    r = focus(w)
    t, QK = token_labels(w.scenario.tokens), w.heads[0].mats["QK^T"]
    top = int(np.argmax(QK[r]))
    return {"row": t[r], "col": t[top], "q": vec(w.heads[0].mats["Q"][r]), "s": n2(QK[r, top])}


def river_mix(w: Walk) -> dict | None:
    r = focus(w)
    t, A, V = token_labels(w.scenario.tokens), w.matrix("A"), w.heads[0].mats["V"]
    top = int(np.argmax(A[r]))
    return {"row": t[r], "col": t[top], "w": pct(A[r, top]), "v": vec(V[top]), "z": vec(w.matrix("Z")[r]),
            "own": vec(V[r])}


def _river(w: Walk) -> Walk:
    from attnwalk.scenario.load import load_scenario

    return compute(load_scenario("river_bank"), w.mode)


def savings_same_a(w: Walk) -> dict | None:
    r, river = focus(w), _river(w)
    if not np.allclose(river.matrix("A")[r], w.matrix("A")[r]):
        return None
    t, V = token_labels(w.scenario.tokens), w.heads[0].mats["V"]
    top = int(np.argmax(w.matrix("A")[r]))
    return {"row": t[r], "a": vec(w.matrix("A")[r]), "z": vec(w.matrix("Z")[r]), "z_river": vec(river.matrix("Z")[r]),
            "col": t[top], "v": vec(V[top]), "v_river": vec(river.heads[0].mats["V"][top])}


def savings_decides(w: Walk) -> dict | None:
    r = focus(w)
    t, A = token_labels(w.scenario.tokens), w.matrix("A")
    top = int(np.argmax(A[r]))
    return {"row": t[r], "col": t[top], "w": pct(A[r, top]), "e": vec(w.mats["E"][r])}


def dog_angle(w: Walk) -> dict | None:
    r = focus(w)
    mats = w.heads[0].mats
    q, K, t = mats["Q"][r], mats["K"], token_labels(w.scenario.tokens)
    keys = [j for j in np.argsort(-mats["QK^T"][r], kind="stable") if np.linalg.norm(K[j]) > 0]
    lengths = {round(float(np.linalg.norm(K[j])), 6) for j in keys}
    if len(lengths) != 1 or not np.linalg.norm(q):
        return None
    sep = ", "
    angles = [math.degrees(math.acos(np.clip(q @ K[j] / (np.linalg.norm(q) * np.linalg.norm(K[j])), -1, 1)))
              for j in keys]
    return {"row": t[r], "q": vec(q), "length": n2(lengths.pop()), "qlen": n2(np.linalg.norm(q)),
            "scores": sep.join(f"{t[j]} {n2(mats['QK^T'][r, j])}" for j in keys),
            "angles": sep.join(f"{round(a)}°" for a in angles)}


def dog_right_angle(w: Walk) -> dict | None:
    r = focus(w)
    mats = w.heads[0].mats
    t = token_labels(w.scenario.tokens)
    zero = [j for j in range(w.scenario.m) if np.linalg.norm(mats["K"][j]) > 0 and abs(mats["QK^T"][r, j]) < 1e-9]
    return {"row": t[r], "col": t[zero[0]], "k": vec(mats["K"][zero[0]])} if zero else None


def length_key(w: Walk) -> dict | None:
    mats, t = w.heads[0].mats, token_labels(w.scenario.tokens)
    lengths = np.linalg.norm(mats["K"], axis=1)
    j = int(np.argmax(lengths))
    col = mats["QK^T"][:, j]
    leaning = [t[i] for i in range(w.scenario.n) if col[i] > 1e-9]
    flat = [t[i] for i in range(w.scenario.n) if abs(col[i]) <= 1e-9 and np.linalg.norm(mats["Q"][i]) > 0]
    if not leaning or not flat:
        return None
    sep = ", "
    return {"col": t[j], "k": vec(mats["K"][j]), "len": n2(lengths[j]), "leaning": sep.join(leaning),
            "flat": flat[-1], "column": vec(col)}


def length_query(w: Walk) -> dict | None:
    r = focus(w)
    mats, A, t = w.heads[0].mats, w.matrix("A"), token_labels(w.scenario.tokens)
    top = int(np.argmax(A[r]))
    q_long, q_short = mats["Q"][r], mats["Q"][top]
    norms = np.linalg.norm(q_long) * np.linalg.norm(q_short)
    if top == r or not norms or q_long @ q_short < norms * (1 - 1e-9):  # the same direction
        return None
    return {"long": t[r], "short": t[top], "ql": vec(q_long), "qs": vec(q_short),
            "ratio": n2(np.linalg.norm(q_long) / np.linalg.norm(q_short)), "w": pct(A[r, top]), "kept": pct(A[top, top])}


def _plain(w: Walk) -> Walk:
    """The same scenario without QK-norm."""
    from attnwalk.features.scores import without_qk_norm

    return compute(without_qk_norm(w.scenario), w.mode)  # the qk_norm lesson's dot scores, without the norm


def norm_left(w: Walk) -> dict | None:
    r = focus(w)
    mats, t = w.heads[0].mats, token_labels(w.scenario.tokens)
    return {"row": t[r], "q": vec(mats["Q"][r]), "d_k": w.scenario.d_k, "root": n2(math.sqrt(w.scenario.d_k)),
            "scale": n2(w.scenario.qk_scale), "two": n2(w.scenario.d_k * w.scenario.qk_scale)}


def norm_long_key(w: Walk) -> dict | None:
    plain = _plain(w)
    mats, t = w.heads[0].mats, token_labels(w.scenario.tokens)
    j = int(np.argmax(np.linalg.norm(mats["K"], axis=1)))
    A, B = w.matrix("A"), plain.matrix("A")
    others = [i for i in range(w.scenario.n) if i != j and B[i, j] - A[i, j] > 0.1]
    if not others:
        return None
    i = max(others, key=lambda i: B[i, j] - A[i, j])
    return {"row": t[i], "col": t[j], "k": vec(mats["K"][j]), "before": pct(B[i, j]), "after": pct(A[i, j])}


def additive_zero(w: Walk) -> dict | None:
    mats, t = w.heads[0].mats, token_labels(w.scenario.tokens)
    zero = [i for i in range(w.scenario.n) if not np.any(mats["Q"][i])]
    if not zero:
        return None
    r = zero[0]
    top = int(np.argmax(w.matrix("A")[r]))
    return {"row": t[r], "scores": vec(mats["QK^T"][r]), "col": t[top], "w": pct(w.matrix("A")[r, top])}


def additive_bound(w: Walk) -> dict | None:
    w_a = np.asarray(w.scenario.w_a)
    return {"w_a": vec(w_a), "bound": n2(np.abs(w_a).sum()), "d_k": w.scenario.d_k}


def cross_shape(w: Walk) -> dict | None:
    n, m = w.scenario.n, w.scenario.m
    return {"n": n, "m": m, "m2": m + 2}


def cross_empty(w: Walk) -> dict | None:
    mats, A = w.heads[0].mats, w.matrix("A")
    rows, keys = token_labels(w.scenario.tokens), token_labels(w.scenario.key_tokens)
    for r in range(w.scenario.n):
        top = int(np.argmax(A[r]))
        if not np.any(mats["V"][top]):
            return {"row": rows[r], "col": keys[top], "w": pct(A[r, top]), "v": vec(mats["V"][top]),
                    "z": vec(w.matrix("Z")[r])}
    return None


def order_same_vector(w: Walk) -> dict | None:
    from attnwalk.scenario.variant import swapped, with_positional

    scn = w.scenario
    bare = with_positional(scn, "none")
    a, b = compute(bare, w.mode), compute(swapped(bare, 0, scn.n - 1), w.mode)
    t = token_labels(scn.tokens)
    return {"token": t[-1], "z": vec(a.matrix("Z")[-1], n4), "other": vec(b.matrix("Z")[0], n4),
            "order": "".join(scn.tokens), "swapped": "".join(reversed(scn.tokens))}


def order_where(w: Walk) -> dict | None:
    if w.scenario.main.positional != "sinusoidal":
        return None
    t = token_labels(w.scenario.tokens)
    last = w.scenario.n - 1
    return {"token": t[last], "x": vec(w.mats["X"][last], n4), "e": vec(w.mats["E"][last]),
            "first": vec(w.mats["E"][last] + w.mats["P"][0], n4), "pos": last}


