"""How one cell of the tiled stage is worked out: its row's keys B at a time, with the four lines
of the recurrence per block (layer/tiled.py) and the final division, written against the Cell the
renderer supplies (layer/cells.py says how).

Every line holds for the digits it prints: each block starts from the previous block's results as
printed, and a line's result is its printed operands' arithmetic, rounded once. Where many blocks
would make the cell long, the middle ones are left out and the next shown block starts from the
true running state, printed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attnwalk.layer import tiled
from attnwalk.layer.cells import Hidden
from attnwalk.layer.walk import whole
from attnwalk.numbering import shown as person

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.walk import Walk


def head_scores(walk: Walk, head: int) -> np.ndarray:
    """The scores head `head`'s tiled form runs on (n, m): what its softmax reads, −∞ where masked
    (uniform mode: M alone)."""
    scn = walk.scenario
    seen = whole(scn, walk.mode, walk.amplify).seen(walk.scores(head))
    scores = tiled.tiled_scores(walk.mode, seen, scn.allowed)
    assert scores is not None  # the stage is not in hard mode's walk
    return scores


def head_steps(walk: Walk, head: int, row: int | None = None) -> list[tiled.Step]:
    """The recurrence of head `head`, for every row or for `row` alone."""
    SM, V = head_scores(walk, head), walk.input(walk.stage("tiled"), 1, head)[1]  # what it reads: V
    B = walk.scenario.tiles
    start = tiled.start_logit(walk.scenario, walk.mode, head)
    return list(tiled.steps(SM, V, B, start)) if row is None else tiled.row_steps(SM, V, B, row, start)


def tiled_cell(c: Cell) -> list:
    steps = head_steps(c.walk, c.head, c.row)
    V = c.walk.input(c.stage, 1, c.head)[1][:, c.col]  # (m,) the values it reads
    tok, j = c.rows[c.row], c.col
    col = c.cols[j]  # the column as the table labels it (from 1, or its name)
    keys = c.walk.scenario.key_tokens
    ninf, minus, t = c.mk.neg_inf, c.mk.minus, c.mk.times
    lines: list = [c.prose(c.say("tiles.cell_intro", B=c.walk.scenario.tiles, count=len(steps)))]
    start = tiled.start_logit(c.scn, c.walk.mode, c.head)
    if start is not None:  # the softmax's extra logit (a sink): the state starts from it
        lines.append(c.prose(c.say("tiles.cell_start", value=c.num(c.printed(start)))))
    m = l = O = None  # the state as printed (None: as yet −∞, 0, 0)
    for index in c.elided(len(steps)):
        if isinstance(index, Hidden):
            lines.append(c.say("tiles.hidden_blocks", count=index.count))
            m = None  # the next shown block starts from the true state
            continue
        s = steps[index]
        if m is None and index > 0:
            m, l, O = float(s.m_old[0]), c.printed(s.l_old[0]), c.printed(s.O_old[0, j])
            m = c.printed(m) if np.isfinite(m) else -np.inf
        elif index == 0:
            m, l, O = (-np.inf, 0.0, 0.0) if start is None else (c.printed(start), 1.0, 0.0)
        names = ", ".join(keys[s.start:s.stop])
        lines.append(c.say("tiles.block", index=person(index), keys=names)
                     + c.colon() + f"S_blk = {c.vec(s.scores[0])}")
        if not s.visible[0]:
            lines.append(c.prose(c.say("tiles.skipped")))
            continue
        top = c.printed(float(s.block_max[0]))
        m_new = max(m, top)
        m_text = ninf if not np.isfinite(m) else c.num(m)
        lines.append(f"m = max({m_text}, {c.num(top)}) = {c.num(m_new)}")
        if np.isfinite(m):
            alpha = c.printed(float(np.exp(m - m_new)))
            lines.append(f"α = e^({c.num(m)} {minus} {c.operand(m_new)}) = {c.num(alpha)}")
        else:
            alpha = 0.0
            lines.append(f"α = e^({ninf}) = 0")
        visible = np.isfinite(s.scores[0])
        # each score as printed above (m_new is the printed max): e^(s − m) then has s ≤ m and
        # cannot overflow, even where a raw score of 1e77 sits past its rounded maximum
        p = [c.printed(float(np.exp(c.printed(x) - m_new))) if ok else 0.0 for x, ok in zip(s.scores[0], visible)]
        shown_p = [k for k in range(len(p)) if visible[k]]
        p_sum = c.printed(alpha * l + sum(p))
        terms = " + ".join(c.num(p[k]) for k in shown_p)
        lines += c.chain(f"l = α{c.mk.dot}l + Σ e^(S_blk {minus} m)", f"{c.num(alpha)} {t} {c.num(l)} + ({terms})",
                         c.num(p_sum))
        O_new = c.printed(alpha * O + sum(p[k] * c.printed(V[s.start + k]) for k in shown_p))
        products = " + ".join(f"{c.num(p[k])} {t} {c.operand(V[s.start + k])}" for k in shown_p)
        lines += c.chain(f"Õ[{col}] = α{c.mk.dot}Õ[{col}] + Σ e^(S_blk {minus} m){c.mk.dot}V_blk[:, {col}]",
                         f"{c.num(alpha)} {t} {c.operand(O)} + ({products})", c.num(O_new))
        # the running l and Õ as the tiled table prints them (1.1839, not 1.1840 from the rounded
        # 0.3679 × 0.5000 + 1): else the cell is worked again with more decimals
        c.lands(p_sum, float(s.l[0]))
        c.lands(O_new, float(s.O[0, j]))
        m, l, O = m_new, p_sum, O_new
    end = c.printed(O / l)
    c.lands(end)
    Z = float(c.walk.matrix("Z", c.head)[c.row, j])
    lines.append(f"{c.sym()}[{tok}, {col}] = Õ[{col}] / l = {c.num(O)} / {c.num(l)} = {c.num(end)}")
    gap = abs(c.value - Z)
    lines.append(c.prose(c.say("tiles.cell_direct", value=c.num(Z), difference=f"{gap:.1e}") if gap
                         else c.say("tiles.cell_same", value=c.num(Z))))
    return lines
