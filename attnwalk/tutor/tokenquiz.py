"""Token questions: where a row will look, asked before the answer is on screen.

- look: which key a query scores highest in QKᵀ (before any mask), asked from the query and the
  keys (rotated under RoPE; with w_a for additive scores), before QKᵀ is shown.
- argmax: which key a query gives the most weight, asked from the whole of S (+ B, + M), so that
  reading it down the column (softmax over the queries) can be committed, and caught.

Both name the mistake a wrong token shows: the query's own token ("itself": W_Q ≠ W_K, so
nothing makes a token match itself best), and for argmax the key a column softmax would favour.
A row asked must have one clear answer at the precision shown.
"""

from __future__ import annotations

import numpy as np

from attnwalk.layer import ops
from attnwalk.layer.axes import axes
from attnwalk.layer.stages import stage_named
from attnwalk.layer.walk import Walk
from attnwalk.text import Text
from attnwalk.tutor.cellquiz import GIVEN_MAX, given_text, givens, in_head, vector
from attnwalk.tutor.quiz import TOKEN, Question, number_text

CLEAR = 5e-5  # the top must lead by more than the last digit shown (4 decimals)


def clear_top(values: np.ndarray, allowed: np.ndarray) -> int | None:
    """The index of the one largest allowed value, or None when the top two tie as shown."""
    ranked = np.sort(values[allowed])[::-1]
    if len(ranked) == 0 or (len(ranked) > 1 and ranked[0] - ranked[1] <= CLEAR * max(1.0, abs(ranked[0]))):
        return None
    return int(np.argmax(np.where(allowed, values, -np.inf)))


def _itself(walk: Walk, row: int, answer: int) -> list[tuple[str, float]]:
    """"itself" where the query's own token is a key (self-attention) and not the answer."""
    same = walk.scenario.source is None and row != answer and row < walk.scenario.m
    return [("itself", float(row))] if same else []


def look_question(walk: Walk, tx: Text, head: int, row: int, qid: str = "look") -> Question | None:
    """"Which key will 撩's query score highest?", from q and the keys; None where the inputs are
    too wide to work by hand or two keys tie."""
    scn = walk.scenario
    mats = walk.heads[head].mats
    if scn.d_k > GIVEN_MAX or scn.m > GIVEN_MAX:
        return None
    scores = mats["QK^T"][row]  # (m,)
    top = clear_top(scores, np.ones(scn.m, dtype=bool))
    if top is None:
        return None
    rows, cols = axes(walk, stage_named("QK^T"), head, tx.lang)
    scoring = stage_named("QK^T", scn.graph)  # what the scores compare: Q and K, or RoPE's turned ones
    q_key, k_key = scoring.reads[0], scoring.keys[0]
    keys = tx.t("ui.list_sep").join(f"{cols[j]} {vector(mats[k_key][j])}" for j in range(scn.m))
    name = "quiz.given.look" if q_key == "Q" else "quiz.given.look_rope"
    given = tx.t(name, row_token=rows[row], q=vector(mats[q_key][row]), keys=keys)
    for feature in scn.features:  # how a feature makes the score from them (additive, QK-norm)
        for key, values in getattr(feature, "look_given", lambda scn, head: [])(scn, head):
            given += " " + given_text(tx, key, values)
    worked = tx.t("quiz.look.worked", token=rows[row],
                  scores=" · ".join(f"{cols[j]} {number_text(scores[j])}" for j in range(scn.m)))
    return Question("look", TOKEN, in_head(walk, tx, head, tx.t("quiz.look.question", row_token=rows[row])),
                    tx.t("quiz.look.hint", row_token=rows[row]), top, cols[top], ("qkv_same",),
                    tokens=tuple(cols), token_text=scn.key_tokens, worked=worked, given=given,
                    mistakes=tuple(_itself(walk, row, top)), qid=f"{qid}:{head}:{row}")


def argmax_question(walk: Walk, tx: Text, head: int, row: int) -> Question | None:
    """"Which token does 女生 attend to most?", from the whole of S (+ B, + M)."""
    scn = walk.scenario
    A = walk.matrix("A", head)
    top = clear_top(A[row], scn.allowed[row])
    if top is None:
        return None
    rows, cols = axes(walk, stage_named("A"), head, tx.lang)
    found = _itself(walk, row, top)
    if walk.mode.smooth:
        with np.errstate(invalid="ignore"):
            column = ops.softmax(ops.masked(walk.scores(head), scn.allowed).T).T  # (n, m)
        wrong = clear_top(np.nan_to_num(column[row]), scn.allowed[row])
        if wrong is not None and wrong != top and all(int(v) != wrong for _, v in found):
            found.append(("column_argmax", float(wrong)))
    weights = " · ".join(f"{cols[j]} {number_text(A[row, j])}" for j in range(len(cols)))
    return Question("argmax", TOKEN, in_head(walk, tx, head, tx.t("quiz.argmax.question", token=rows[row])),
                    tx.t("quiz.argmax.hint", token=rows[row]), top, cols[top], ("read_transposed",),
                    tokens=tuple(cols), token_text=scn.key_tokens,
                    worked=tx.t("quiz.argmax.worked", token=rows[row], weights=weights),
                    given=givens(walk, tx, "A", head, row, top), mistakes=tuple(found),
                    qid=f"argmax:{head}:{row}")
