"""What a learner's wrong number would be if they made one of the known mistakes, and which one.

For a cell of QKᵀ, S, A or Z, `mistake_values` recomputes the cell as each misconception computes
it, with the layer's own functions (another mode by `with_mode`, `ops.softmax` along the other
axis, the mask left off), so a diagnosis can never disagree with the walk's arithmetic:

    column_softmax  softmax down the column (over the queries) instead of along the row
    no_scale        S, A, Z with QKᵀ not divided by √d_k
    transposed      the cell across the diagonal, M[j, i] for M[i, j]
    k_for_v         Z = A · K, K mixed in place of V (only when d_k = d_v)
    mask_forgotten  softmax over every key, the mask left off
    neighbour_row   the same column of the row above or below
    neighbour_col   the same row's column to the left or right
    rounded         the stage computed from the previous one rounded to one decimal place
    unrotated       RoPE's QKᵀ or S from Q and K as projected, the rotation left out

`diagnose` says which of them an answer matches (within the question's tolerance), nearest first.
Pure: no text, no printing.
"""

from __future__ import annotations

import numpy as np

from attnwalk.layer import ops
from attnwalk.layer.scores import raw_scores
from attnwalk.layer.walk import Walk, with_mode

NAMES = ("column_softmax", "no_scale", "transposed", "k_for_v", "mask_forgotten", "neighbour_row",
         "neighbour_col", "rounded", "kept_scale",  # kept_scale: the what-if answered with √d_k still in
         "unrotated",  # RoPE: q · k of the vectors before rotation
         "scaled_anyway")  # the unscaled mode's S (or A, Z) worked out with the usual √d_k
ROUND = 1  # decimal places of a learner's early rounding: 2 would mostly stay within tolerance


_OTHER_MODES: dict[tuple[int, str], tuple[Walk, Walk]] = {}  # (id(walk), mode): (walk, walk in mode)


def other_mode(walk: Walk, mode: str) -> Walk:
    """`walk` in another mode (layer.walk.with_mode), kept for the last few walks asked about: a
    quiz asks it once a question on S, A or Z (of the walk, and of the walk in the other mode),
    and each asking recomputed every head (on the benchmark layer six times, 9 s of the quiz's
    11 s); the quiz's bound (scenario/limits.check_work) counts it once."""
    found = _OTHER_MODES.get((id(walk), mode))
    if found is not None and found[0] is walk:  # the walk itself is kept, so its id is not reused
        return found[1]
    if len(_OTHER_MODES) >= 4:
        _OTHER_MODES.clear()
    other = with_mode(walk, mode)
    _OTHER_MODES[(id(walk), mode)] = (walk, other)
    _OTHER_MODES[(id(other), walk.mode.name)] = (other, walk)  # and the way back
    return other


def candidates(walk: Walk, key: str, head: int, row: int, col: int) -> list[tuple[str, float]]:
    """What each mistake that applies to the cell (key, head, row, col) gives, as (name, value):
    a name may come twice (the row above and the row below).

    Only values that differ from the right one and are finite: a mistake that gives the right
    number here cannot be told apart from knowing."""
    scn = walk.scenario
    M = walk.matrix(key, head)
    right = float(M[row, col])
    mats = walk.heads[head].mats
    out: list[tuple[str, float | None]] = []
    if key in ("A", "Z") and walk.mode.smooth:  # softmax rows: the axis and the mask matter
        S = walk.scores(head) * walk.amplify  # S, or S + B under ALiBi
        with np.errstate(invalid="ignore"):  # a column with every query masked has no softmax
            column = ops.softmax(ops.masked(S, scn.allowed).T).T  # each column sums to 1 instead
        out.append(("column_softmax", _at(column, mats, key, row, col)))
        if not scn.allowed.all():
            out.append(("mask_forgotten", _at(ops.softmax(S), mats, key, row, col)))
    if key in ("S", "A", "Z") and walk.scale != 1.0 and walk.mode.reads_scores:
        out.append(("no_scale", float(other_mode(walk, "unscaled").matrix(key, head)[row, col])))
    if key in ("S", "A", "Z") and not walk.mode.divides and walk.mode.reads_scores:  # unscaled
        out.append(("scaled_anyway", float(other_mode(walk, "scaled").matrix(key, head)[row, col])))
    if walk.stage(key).square and row != col and col < M.shape[0] and row < M.shape[1]:
        out.append(("transposed", float(M[col, row])))
    if key == "Z" and mats["K"].shape == mats["V"].shape:
        out.append(("k_for_v", float((mats["A"] @ mats["K"])[row, col])))
    if key in ("QK^T", "S") and "Q_rot" in mats:  # RoPE: dotted before turning
        raw = float(raw_scores(scn, mats["Q"][row:row + 1], mats["K"][col:col + 1])[0, 0])
        out.append(("unrotated", raw if key == "QK^T" else raw / walk.scale))
    out += [("neighbour_row", float(M[r, col])) for r in (row - 1, row + 1) if 0 <= r < M.shape[0]]
    out += [("neighbour_col", float(M[row, c])) for c in (col - 1, col + 1) if 0 <= c < M.shape[1]]
    out.append(("rounded", _rounded(walk, key, head, row, col)))
    return [(name, value) for name, value in out
            if value is not None and np.isfinite(value) and abs(value - right) > 1e-9]


def mistake_values(walk: Walk, key: str, head: int, row: int, col: int) -> dict[str, float]:
    """One value per mistake (the first neighbour where there are two), for a worksheet."""
    values: dict[str, float] = {}
    for name, value in candidates(walk, key, head, row, col):
        values.setdefault(name, value)
    return values


def _at(weights: np.ndarray, mats, key: str, row: int, col: int) -> float:
    """The cell of A made from `weights`, or of Z = weights · V."""
    return float(weights[row, col] if key == "A" else (weights @ mats["V"])[row, col])


def _rounded(walk: Walk, key: str, head: int, row: int, col: int) -> float | None:
    """The cell computed from the stage before it rounded to ROUND decimal places, as a learner
    who copies 3.2 for 3.1919 off the screen gets it."""
    mats = walk.heads[head].mats
    r = lambda M: np.round(M, ROUND)  # noqa: E731
    if key == "QK^T" and walk.scenario.score == "dot" and not walk.scenario.qk_norm:
        rot = "_rot" if walk.scenario.rope else ""  # RoPE: the rotated vectors are dotted
        return float(r(mats["Q" + rot])[row] @ r(mats["K" + rot])[col])
    if key == "S":
        return float(r(mats["QK^T"])[row, col] / walk.scale)
    if key == "A" and walk.mode.smooth:
        S = r(walk.scores(head)) * walk.amplify
        return float(ops.softmax(ops.masked(S, walk.scenario.allowed))[row, col])
    if key == "Z":
        return float((r(mats["A"]) @ mats["V"])[row, col])
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
