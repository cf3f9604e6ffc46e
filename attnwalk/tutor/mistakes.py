"""What a learner's wrong answer would be if they made one of the known mistakes, and which one.

For a cell of QKᵀ, S, A or Z, `candidates` recomputes the cell as each misconception computes it,
with the layer's own functions (another mode by `with_mode`, `ops.softmax` along the other axis,
the mask left off), so a diagnosis can never disagree with the walk's arithmetic:

    masked_small     a masked weight answered as small but not 0 (any answer but 0: `diagnosis`)
    mask_forgotten   softmax over every key, the mask left off
    sink_forgotten   softmax without the softmax's extra logit (an attention sink): rows summing to 1
    column_softmax   softmax down the column (over the queries) instead of along the row
    no_scale         S, A, Z with QKᵀ not divided by √d_k
    divided_by_d_k   S = QKᵀ / d_k: the square root forgotten
    times_sqrt_d_k   S = QKᵀ · √d_k: multiplied instead of divided
    scaled_anyway    the unscaled mode's S (or A, Z) worked out with the usual √d_k
    scaled_additive  additive scores divided by √d_k, which they never are
    kept_scale       the what-if (A without √d_k) answered with √d_k still in
    unrotated        RoPE's QKᵀ or S from Q and K as projected, the rotation left out
    transposed       the cell across the diagonal, M[j, i] for M[i, j]
    k_for_v          Z = A · K, K mixed in place of V (only when d_k = d_v)
    uniform          A or Z with every allowed key weighted alike, the scores ignored
    uniform_unmasked A or Z with every key weighted alike, the scores and the mask ignored
    a_column         Z from A's column instead of its row, (Aᵀ · V)[i, c]
    top_value        Z as the top key's row of V taken whole (a hard lookup)
    itself           a token question answered with the query's own token
    column_argmax    "which key most?" answered where softmax down the column peaks
    not_rescaled     the online softmax's l after a block, the old sum not rescaled by α
    missing_term     a gradient with a chain-rule term dropped: the softmax Jacobian's rowsum
                     term, ∂L/∂S = A ⊙ ∂L/∂A (tutor/gradquiz.py)
    sign_flipped     a gradient with its sign turned (the step's direction, −∂L/∂W, for ∂L/∂W)
    neighbour_row    the same column of the row above or below          } slips, not
    neighbour_col    the same row's column to the left or right         } misconceptions
    rounded          the stage computed from the previous one rounded to one decimal place

`diagnose` says which of them an answer matches (within the question's tolerance), nearest first.
A misconception that gives the right number is kept (the question then cannot tell knowing from
the mistake, and is not asked: quiz.fair); a slip that does is dropped. Pure: no text, no printing.
"""

from __future__ import annotations

import dataclasses
import functools
import weakref

import numpy as np

from attnwalk.layer import ops
from attnwalk.layer.stages import stage_named
from attnwalk.layer.walk import Walk, whole, with_mode

# In the order one name is chosen where two mistakes give the same number (the misconception
# before the slip: "4.0000 (forgot √d_k)", not also "4.0000 (read the neighbouring column)").
NAMES = ("masked_small", "mask_forgotten", "column_softmax", "no_scale", "divided_by_d_k",
         "times_sqrt_d_k", "kept_scale", "scaled_anyway", "scaled_additive", "unrotated",
         "transposed", "k_for_v", "uniform", "uniform_unmasked", "a_column", "top_value", "itself",
         "column_argmax", "not_rescaled", "missing_term", "sign_flipped", "sink_forgotten",
         "neighbour_row", "neighbour_col", "rounded")
# Reading the wrong cell or rounding early: a number they give inside the tolerance is simply not
# wrong at the precision asked (4.51 for 4.5140 at ±0.005 is right to two decimals), and is
# dropped; a misconception inside it makes the question ask for more precision (tutor/quiz.py
# `fair`), or where none tells them apart, another cell. Outside it, each is named.
SLIPS = frozenset({"neighbour_row", "neighbour_col", "rounded"})
EXACT_ONLY = SLIPS  # dropped where they give the right number
ROUND = 1  # decimal places of a learner's early rounding: 2 would mostly stay within tolerance


def candidates(walk: Walk, key: str, head: int, row: int, col: int) -> list[tuple[str, float]]:
    """What each mistake that applies to the cell (key, head, row, col) gives, as (name, value):
    a name may come twice (the row above and the row below).

    Only finite values; a slip's only where it differs from the right one. A misconception that
    gives the right number here is kept: it cannot be told apart from knowing (quiz.fair)."""
    M = walk.matrix(key, head)
    right = float(M[row, col])
    out = [(name, float(W[row, col])) for name, W in _maps(walk, key, head)]
    if walk.stage(key).square and row != col and col < M.shape[0] and row < M.shape[1]:
        out.append(("transposed", float(M[col, row])))
    out += [("neighbour_row", float(M[r, col])) for r in (row - 1, row + 1) if 0 <= r < M.shape[0]]
    out += [("neighbour_col", float(M[row, c])) for c in (col - 1, col + 1) if 0 <= c < M.shape[1]]
    return [(name, value) for name, value in out
            if np.isfinite(value) and (name not in EXACT_ONLY or abs(value - right) > 1e-9)]


@functools.lru_cache(maxsize=32)  # a quiz tries many cells of one stage: each map is made once
def _maps(walk: Walk, key: str, head: int) -> tuple[tuple[str, np.ndarray], ...]:
    """Each whole-matrix mistake that applies to stage `key` of `head`, as (name, matrix)."""
    scn = walk.scenario
    mats = walk.heads[head].mats
    mode = walk.mode
    out: list[tuple[str, np.ndarray]] = []
    mix = (lambda W: W) if key == "A" else (lambda W: W @ mats["V"])  # noqa: E731  A, or Z = A · V
    if key in ("A", "Z") and mode.smooth:  # softmax rows: the axis and the mask matter
        S = walk.scores(head) * walk.amplify  # S, or S + B under ALiBi
        logit = walk.stage("A").extra_logit  # a term of each row's sum that is no key's (a sink)
        extra = None if logit is None else logit(scn, head)
        with np.errstate(invalid="ignore"):  # a column with every query masked has no softmax
            out.append(("column_softmax", mix(ops.softmax(ops.masked(S, scn.allowed).T).T)))
        if not scn.allowed.all():
            out.append(("mask_forgotten", mix(ops.softmax(S, extra))))
        if extra is not None:
            out.append(("sink_forgotten", mix(ops.softmax(ops.masked(S, scn.allowed)))))
    if key in ("A", "Z") and mode.reads_scores:
        out.append(("uniform", mix(ops.uniform_weights(scn.allowed))))
        if not scn.allowed.all():  # every key alike, the mask forgotten too: 1/m
            out.append(("uniform_unmasked", mix(ops.uniform_weights(np.ones_like(scn.allowed)))))
    if key in ("S", "A", "Z") and walk.scale != 1.0 and mode.reads_scores:
        out.append(("no_scale", in_mode(walk, "unscaled").matrix(key, head)))
    if key in ("S", "A", "Z") and not mode.divides and mode.reads_scores and scn.scorer.divides:
        out.append(("scaled_anyway", in_mode(walk, "scaled").matrix(key, head)))
    if key == "S":
        QK = mats["QK^T"]
        if walk.scale != 1.0:
            out += [("divided_by_d_k", QK / scn.d_k), ("times_sqrt_d_k", QK * np.sqrt(scn.d_k))]
        if not scn.scorer.divides:
            out.append(("scaled_additive", QK / np.sqrt(scn.d_k)))
    scoring = stage_named("QK^T", scn.graph)
    if key in ("QK^T", "S") and scoring.reads != ("Q",):  # RoPE's: dotted before turning
        # the graph's own score, made from Q and K instead of what it reads (Q_rot, K_rot)
        ctx = dataclasses.replace(whole(scn, mode, walk.amplify), head=head)
        raw = scoring.compute(ctx, mats["Q"], mats["K"], *(scn.param(p) for p in scoring.params))  # (n, m)
        out.append(("unrotated", raw if key == "QK^T" else raw / walk.scale))
    if key == "Z":
        A, V = mats["A"], mats["V"]
        if mats["K"].shape == V.shape:
            out.append(("k_for_v", A @ mats["K"]))
        if A.shape[0] == A.shape[1]:  # self-attention: A's column is as long as its row
            out.append(("a_column", A.T @ V))
        if mode.reads_scores:
            out.append(("top_value", ops.hard_weights(ops.masked(walk.scores(head), scn.allowed)) @ V))
    rounded = _rounded(walk, key, head)
    if rounded is not None:
        out.append(("rounded", rounded))
    return tuple(out)


_MODES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # walk -> {mode name: walk}


def in_mode(walk: Walk, mode: str) -> Walk:
    """`walk` under another mode, computed once per walk (a quiz asks S, A, Z and the what-if of
    the same unscaled walk; on the shapes lesson each costs a whole layer). The way back is known
    too (the unscaled walk's "scaled anyway" is the walk itself), held weakly: a strong reference
    each way would keep both alive."""
    if walk.mode.name == mode:
        return walk
    known = _MODES.setdefault(walk, {})
    found = known.get(mode)
    if isinstance(found, weakref.ref):
        found = found()
    if found is None:
        found = known[mode] = with_mode(walk, mode)
        _MODES.setdefault(found, {})[walk.mode.name] = weakref.ref(walk)
    return found


def mistake_values(walk: Walk, key: str, head: int, row: int, col: int) -> dict[str, float]:
    """One value per mistake (the first neighbour where there are two), for a worksheet."""
    values: dict[str, float] = {}
    for name, value in candidates(walk, key, head, row, col):
        values.setdefault(name, value)
    return values


def _rounded(walk: Walk, key: str, head: int) -> np.ndarray | None:
    """The stage computed from the stage before it rounded to ROUND decimal places, as a learner
    who copies 3.2 for 3.1919 off the screen gets it."""
    mats = walk.heads[head].mats
    r = lambda M: np.round(M, ROUND)  # noqa: E731
    if key == "QK^T":  # what the scores read (Q and K, RoPE's turned ones), rounded, scored as the layer does
        scn = walk.scenario
        stage = stage_named("QK^T", scn.graph)
        return stage.compute(whole(scn, walk.mode, walk.amplify), *(r(mats[name]) for name in stage.reads + stage.keys),
                             *(scn.param(p) for p in stage.params))
    if key == "S":
        return r(mats["QK^T"]) / walk.scale
    if key == "A" and walk.mode.smooth:
        S = r(walk.scores(head)) * walk.amplify
        return ops.softmax(ops.masked(S, walk.scenario.allowed))
    if key == "Z":
        return r(mats["A"]) @ mats["V"]
    return None


def diagnose(found: list[tuple[str, float]], answer: float, tolerance: float,
             right: float | None = None) -> list[tuple[str, float]]:
    """The (mistake, value) pairs of `found` (see `candidates`) that `answer` matches within
    `tolerance`, nearest first, one per mistake; none when the answer is right."""
    if right is not None and abs(answer - right) <= tolerance + 1e-12:
        return []
    near = sorted((abs(answer - value), NAMES.index(name), name, value) for name, value in found
                  if abs(answer - value) <= tolerance + 1e-12)
    out: list[tuple[str, float]] = []
    for _, _, name, value in near:
        if name not in (n for n, _ in out):
            out.append((name, value))
    return out
