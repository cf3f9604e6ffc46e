"""Which cell a prediction asks, so that nothing on the screen before it already shows the answer
(issue 37): Z from a one-hot column of V is a weight the A screen has just shown, and a note may
have named the number ("0.33 of its attention"). The screen's own worked cell comes first; where
its number is on screen, the nearest cell whose number is not. A cell other than the worked one
gets its arithmetic in one line under a wrong prediction (`worked_line`).

What counts as on screen before stage `key`: every matrix of the stages shown before it (all
heads, at the tables' 4 decimals), the notes of those stages, and the opening as --predict shows
it (the title and the first paragraph of the description).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np

from attnwalk.layer.axes import axes, default_cell
from attnwalk.layer.walk import Walk
from attnwalk.text import pick
from attnwalk.tutor.quiz import number_text

CANDIDATES = 32  # cells looked at: the worked one, its row, then the nearest rows


def cells(walk: Walk, key: str, head: int) -> Iterator[tuple[int, int]]:
    """The worked cell, then the others of its row, then those of the nearest rows (allowed, off
    the diagonal for query × key stages), at most CANDIDATES."""
    scn = walk.scenario
    M = walk.matrix(key, head)
    row, col = default_cell(walk, key, head)
    square = walk.stage(key).square
    rows = sorted(range(M.shape[0]), key=lambda r: (abs(r - row), r))
    out = [(row, col)] + [(r, c) for r in rows for c in range(M.shape[1])
                          if (r, c) != (row, col) and not (square and (r == c or not scn.allowed[r, c]))]
    yield from out[:CANDIDATES]


def forms(x: float) -> set[str]:
    """How a screen or a note may write |x|: 4, 3 or 2 decimals, or a whole percentage, each only
    where it keeps two significant digits (0.02 names nothing of 0.0176), none that reads 0 or 1."""
    x = abs(x)
    out = {f"{x:.{d}f}" for d in (4, 3, 2) if x >= 10.0 ** (1 - d)}
    out |= {f"{round(100 * x)}%"} if 0.1 <= x < 1 else set()
    return {f for f in out if float(f.rstrip("%")) not in (0.0, 1.0, 100.0)}


def shown_before(walk: Walk, key: str, value: float, lang: str) -> bool:
    """Whether the screens before stage `key` already show `value`."""
    keys = [s.key for s in walk.stages]
    earlier = keys[:keys.index(key)] if key in keys else keys
    target = number_text(abs(value))
    for k in earlier:
        if key == "S" and k == "QK^T" and not walk.mode.scales(walk.scenario.scorer):
            continue  # S = QKᵀ in this mode: the question is whether it divides, and says so
        mats = [walk.heads[h].mats[k] for h in range(walk.scenario.heads) if k in walk.heads[h].mats] \
            or ([walk.mats[k]] if k in walk.mats else [])
        for M in mats:
            values = np.abs(np.asarray(M, dtype=float))
            near = values[np.abs(values - abs(value)) <= max(1e-4, 1e-3 * abs(value))]  # only these can print alike
            if any(number_text(v) == target for v in near.ravel()):
                return True
    scn = walk.scenario
    description = pick(scn.description, lang) or ""
    paragraphs = [p.strip() for p in description.split("\n") if p.strip()]  # as render/lesson.py cuts it
    said = [pick(scn.title, lang) or "", paragraphs[0] if paragraphs else ""]
    said += [pick(scn.notes.get(k), lang) or "" for k in earlier]
    text = " ".join(said)
    return any(re.search(rf"(?<![\d.]){re.escape(f)}(?!\d)", text) for f in forms(value))


def term(x: float) -> str:
    """A factor of a worked sum as the worked cells write it: a negative one in brackets."""
    s = number_text(float(x))
    return f"({s})" if s.startswith("-") else s


def products(a, b) -> str:
    """a₁ × b₁ + a₂ × b₂ + …, as the worked cells write a dot product."""
    return " + ".join(f"{term(x)} × {term(y)}" for x, y in zip(a, b))


def worked_line(walk: Walk, key: str, head: int, row: int, col: int, lang: str) -> str:
    """The arithmetic of a cell in one line, from the numbers the screens show: Z as the row of A
    times the column of V, A as its row's softmax, S as QKᵀ over √d_k; "" for another stage."""
    mats = walk.heads[head].mats
    rows, cols = axes(walk, walk.stage(key), head, lang)
    symbol = walk.stage(key).symbol
    cell = f"{symbol}[{rows[row]}, {cols[col]}]"
    value = number_text(float(walk.matrix(key, head)[row, col]))
    if key == "Z":
        return f"{cell} = {products(mats['A'][row], mats['V'][:, col])} = {value}"
    if key == "A":
        S = np.where(walk.scenario.allowed[row], walk.scores(head)[row] * walk.amplify, -np.inf)
        e = np.exp(S - S.max())
        return (f"{cell} = e^({number_text(S[col])} − {number_text(S.max())}) / Σ_j e^(s_j − {number_text(S.max())})"
                f" = {number_text(e[col])} / {number_text(e.sum())} = {value}")
    if key == "S" and walk.scale != 1.0:
        return f"{cell} = {number_text(float(mats['QK^T'][row, col]))} / {number_text(walk.scale)} = {value}"
    return ""
