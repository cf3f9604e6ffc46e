"""Quiz questions on the tiled (online) softmax: given a row's blocks of scores and the running
state before one block, predict m and l after it (layer/tiled.py's recurrence).

The row is one the walk's tiled screen did not work out (its worked cell follows the focus row)
where there is one; the block asked is the first after the first one that raises the running
maximum (α < 1: the rescaling the lesson is about), else the first after the first that has a
visible key; a row with one block has nothing to carry over and gets no question. A wrong answer
is followed by that row's worked cell, the recurrence block by block.
"""

from __future__ import annotations

import math
import random

import numpy as np

from attnwalk.layer.axes import default_cell, token_labels
from attnwalk.layer.tiledcells import head_steps
from attnwalk.layer.walk import Walk
from attnwalk.text import Text
from attnwalk.tutor.quiz import NUMBER, Question, fair, number_text, tolerance_text
from attnwalk.numbering import shown as person


def tiled_questions(walk: Walk, tx: Text, head: int, pick: random.Random | None) -> list[Question]:
    """m and l after one block of a row (with a seed, of a random row) that has one to ask."""
    if "tiled" not in walk.heads[head].mats:
        return []
    steps = head_steps(walk, head)
    shown = default_cell(walk, "tiled", head)[0]
    rows = list(range(walk.scenario.n)) if pick is None else pick.sample(range(walk.scenario.n), walk.scenario.n)
    rows = [r for r in rows if r != shown] + [shown]
    for r in rows:
        b = _block(steps, r)
        if b is not None:
            asked = [_question(walk, tx, head, steps, r, b, what) for what in ("m", "l")]
            return [q for q in asked if q is not None]
    return []


def _block(steps: list, r: int) -> int | None:
    asked = [b for b in range(1, len(steps)) if steps[b].visible[r] and np.isfinite(steps[b].m_old[r])]
    rescaled = [b for b in asked if steps[b].alpha[r] < 1.0]
    return (rescaled or asked or [None])[0]


def _question(walk: Walk, tx: Text, head: int, steps: list, r: int, b: int, what: str) -> Question | None:
    scn = walk.scenario
    token = token_labels(scn.tokens)[r]
    s = steps[b]
    blocks = " | ".join("[" + ", ".join(number_text(float(x)) if math.isfinite(x) else "−∞"
                                       for x in st.scores[r]) + "]" for st in steps[:b + 1])
    given = tx.t("quiz.tiled.given", token=token, B=scn.tiles, blocks=blocks, before=b,
                 m=number_text(float(s.m_old[r])), l=number_text(float(s.l_old[r])))
    value = float(s.m[r] if what == "m" else s.l[r])
    # l: the block's terms added to l as it was, the old sum never rescaled by α (the block asked
    # raises the maximum where a row has one that does: the point of the rescaling)
    found = [("not_rescaled", float(s.l_old[r] + s.p[r].sum()))] if what == "l" else []
    judged = fair(value, found)
    if judged is None:
        return None
    tol, found = judged
    question = tx.t(f"quiz.tiled.question_{what}", token=token, block=person(b), tol=tolerance_text(tx, tol))
    if scn.heads > 1:
        question = f"{tx.t('ui.head', head=person(head), heads=scn.heads)} · {question}"
    visible = [float(x) for x in s.scores[r] if math.isfinite(x)]
    worked = tx.t("quiz.tiled.worked", block=person(b), top=number_text(max(visible)),
                  m_old=number_text(float(s.m_old[r])), m=number_text(float(s.m[r])),
                  alpha=number_text(float(s.alpha[r])), l_old=number_text(float(s.l_old[r])),
                  terms=" + ".join(f"e^({number_text(x)} − {number_text(float(s.m[r]))})" for x in visible),
                  l=number_text(float(s.l[r])))
    return Question("tiled", NUMBER, question, tx.t(f"quiz.tiled.hint_{what}"), value, number_text(value),
                    (), tolerance=tol, cell=("tiled", head, r, 0), worked=worked, given=given, mistakes=found,
                    qid=f"tiled:{what}:{head}:{r}:{b}")
