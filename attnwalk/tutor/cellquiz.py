"""Number questions on one cell of QKᵀ, S, A or Z, fair to answer and fair to judge.

A question states the inputs to compute its cell from, as the walk's earlier stages show them, and
never the answer among them: q and k for QKᵀ, QKᵀ and d_k for S, the whole of S (+ B, + M) for A
(so a softmax down the column can be committed, and caught), the whole of A and V for Z (so the
uniform average, A's column and V's top row taken whole can be). Its tolerance comes from the
precision asked and never holds a misconception's number (quiz.fair); a cell where one would is
not asked, nor one that is 0 for want of anything to work out. A masked weight is asked exactly:
it is 0, not small.
"""

from __future__ import annotations

import re

import numpy as np

from attnwalk.layer.axes import axes
from attnwalk.layer.graph import grouped
from attnwalk.layer.roles import SCALED, logits
from attnwalk.layer.stages import stage_named
from attnwalk.layer.walk import Walk
from attnwalk.text import Text, text
from attnwalk.tutor import mistakes
from attnwalk.tutor.quiz import NUMBER, Question, answer_text, fair, number_text, tolerance_text
from attnwalk.numbering import shown as person

GIVEN_MAX = 8  # a row of inputs longer than this is not printed (the shapes lesson has 100 keys)


def in_head(walk: Walk, tx: Text, head: int, question: str) -> str:
    """The question, led by its head ("head 1 / 2 · …") when the scenario has several."""
    heads = walk.scenario.heads
    return f"{tx.t('ui.head', head=person(head), heads=heads)} · {question}" if heads > 1 else question


def masked_cell(walk: Walk, key: str, row: int, col: int) -> bool:
    """A weight the mask forbids: exactly 0."""
    return key == "A" and not walk.scenario.allowed[row, col]


def judging(walk: Walk, key: str, head: int, row: int, col: int):
    """(tolerance, mistakes) to ask this cell with, or None when it cannot be asked fairly: a
    misconception gives its number, or it is 0 without a mask (a zero key, a zero column of V:
    nothing to work out)."""
    value = float(walk.matrix(key, head)[row, col])
    masked = masked_cell(walk, key, row, col)
    if value == 0.0 and not masked:
        return None
    found = mistakes.candidates(walk, key, head, row, col)
    if masked:  # asked about the mask: a mistake that keeps the mask (column softmax, uniform) gives 0 too
        found = [(name, v) for name, v in found if v != value]
    return fair(value, found, masked)


def cell_question(walk: Walk, key: str, row: int, col: int, head: int = 0, lang: str = "en",
                  what_if: bool = False, given: bool = True, hint: str | None = None) -> Question | None:
    """The number question on one cell (a what-if: that cell of A without √d_k), or None where a
    misconception's number cannot be told from the answer at any precision asked."""
    tx = text(lang)
    if what_if:
        return _what_if(walk, tx, head, row, col)
    judged = judging(walk, key, head, row, col)
    if judged is None:
        return None
    tol, found = judged
    stage = walk.stage(key)
    value = float(walk.matrix(key, head)[row, col])
    rows, cols = axes(walk, stage, head, tx.lang)
    within = tolerance_text(tx, tol)
    if stage.square:
        question = tx.t("quiz.cell.question", stage=stage.symbol, row=person(row), col=person(col),
                        row_token=rows[row], col_token=cols[col], tol=within)
    else:
        question = tx.t("quiz.cell.question_dim", stage=stage.symbol, row_token=rows[row], col=cols[col],
                        tol=within)
    if hint is None:
        special = [name for feature in walk.scenario.features if hasattr(feature, "quiz_hint")
                   for name in [feature.quiz_hint(walk.scenario, key)] if name]
        hint = tx.t(special[0]) if special else tx.t(
            "quiz.cell.hint", formula=stage.formula_in(walk.scenario, walk.mode))
    return Question("cell", NUMBER, in_head(walk, tx, head, question), hint, value, answer_text(value, tol),
                    ("read_transposed",) if stage.square else (), tolerance=tol,
                    cell=(key, head, row, col), given=givens(walk, tx, key, head, row, col) if given else "",
                    mistakes=found, qid=f"cell:{key}:{head}:{row}:{col}",
                    masked=masked_cell(walk, key, row, col))


def vector(values) -> str:
    return "[" + ", ".join(number_text(float(v)) if np.isfinite(v) else "−∞" for v in values) + "]"


def matrix(M: np.ndarray) -> str:
    """A small matrix in one line, as nested rows: [[3.5002, 4.4115], [3.1919, 3.8314]]."""
    return "[" + ", ".join(vector(row) for row in M) + "]"


def scores_name(walk: Walk, masked: bool = True) -> str:
    """What softmax reads, named as the graph has it (roles.logits: S, S + B, or a stage a feature
    put between), with S written QKᵀ where this walk does not divide (the what-if's unscaled
    walk), + M with a mask."""
    scn = walk.scenario
    name = logits(walk.computed).symbol
    if scn.scorer.divides and not walk.mode.scales(scn.scorer):  # S = QKᵀ in this walk
        name = re.sub(r"(?<![A-Za-z])S(?![A-Za-z])", "QKᵀ", name)
    return f"{grouped(name)} + M" if masked and not scn.allowed.all() else name


def feature_givens(walk: Walk, tx: Text, key: str, head: int) -> list[str]:
    """What the scenario's features add to a question's givens on stage `key` (their `quiz_given`:
    additive scores' w_a, QK-norm's scale), each a sentence."""
    return [given_text(tx, name, values) for feature in walk.scenario.features
            for name, values in getattr(feature, "quiz_given", lambda scn, key, head: [])(walk.scenario, key, head)]


def given_text(tx: Text, key: str, values: dict) -> str:
    """A feature's given as a sentence: its numbers written as the quiz writes them (a vector in
    brackets, a number to the quiz's digits)."""
    return tx.t(key, **{k: vector(v) if np.ndim(v) else number_text(float(v)) for k, v in values.items()})


def givens(walk: Walk, tx: Text, key: str, head: int, row: int, col: int) -> str:
    """The numbers a cell is computed from, as the walk's earlier stages show them."""
    scn = walk.scenario
    mats = walk.heads[head].mats
    rows, cols = axes(walk, stage_named("A"), head, tx.lang)
    sep = tx.t("ui.list_sep")
    small = scn.n <= GIVEN_MAX and scn.m <= GIVEN_MAX
    if key == "QK^T" and scn.d_k <= GIVEN_MAX:
        scoring = stage_named("QK^T", scn.graph)  # what is scored: Q and K, or RoPE's turned ones
        q_key, k_key = scoring.reads[0], scoring.keys[0]
        given = tx.t("quiz.given.qk" if q_key == "Q" else "rope.given", row_token=rows[row], col_token=cols[col],
                     q=vector(mats[q_key][row]), k=vector(mats[k_key][col]))
        return " ".join([given, *feature_givens(walk, tx, key, head)])
    if key == "S":
        return tx.t("quiz.given.s" if scn.scorer.divides else "quiz.given.s_additive",
                    row_token=rows[row], col_token=cols[col],
                    value=number_text(float(mats["QK^T"][row, col])), d_k=scn.d_k)
    if key == "A" and small:
        seen = np.where(scn.allowed, walk.scores(head), -np.inf)  # (n, m)
        return tx.t("quiz.given.a", name=scores_name(walk), matrix=matrix(seen), rows=sep.join(rows),
                    cols=sep.join(cols))
    if key == "A" and scn.m <= 4 * GIVEN_MAX:  # too many rows to print whole: the cell's own row
        seen = np.where(scn.allowed[row], walk.scores(head)[row], -np.inf)  # (m,)
        return tx.t("quiz.given.a_row", name=scores_name(walk), row_token=rows[row], row=vector(seen),
                    cols=sep.join(cols))
    dims = axes(walk, stage_named("Z"), head, tx.lang)[1] if key == "Z" else ()
    V = mats[walk.stage("Z").keys[0]] if key == "Z" else None  # what Z mixes
    if key == "Z" and small and V.shape[1] <= GIVEN_MAX:
        return tx.t("quiz.given.z", a=matrix(mats["A"]), v=matrix(V), rows=sep.join(rows),
                    cols=sep.join(cols), dims=sep.join(dims))
    if key == "Z" and scn.m <= 4 * GIVEN_MAX:  # the row of A and the column of V the cell sums
        return tx.t("quiz.given.z_row", row_token=rows[row], a=vector(mats["A"][row]), dim=dims[col],
                    v=vector(V[:, col]), cols=sep.join(cols))
    return ""


def _what_if(walk: Walk, tx: Text, head: int, row: int, col: int) -> Question | None:
    """"Without √d_k, what does A[bank, river] become?": the cell of A in the unscaled mode."""
    unscaled = mistakes.in_mode(walk, "unscaled")
    value = float(unscaled.matrix("A", head)[row, col])
    before = float(walk.matrix("A", head)[row, col])
    # the unscaled walk's "scaled anyway" is this question's "kept √d_k": the weight as it is
    found = [("kept_scale" if name == "scaled_anyway" else name, v)
             for name, v in mistakes.candidates(unscaled, "A", head, row, col)]
    judged = fair(value, found)
    if judged is None:
        return None
    tol, found = judged
    rows, cols = axes(walk, stage_named("A"), head, tx.lang)
    question = tx.t("quiz.what_if.question", row_token=rows[row], col_token=cols[col],
                    before=number_text(before), d_k=walk.scenario.d_k, tol=tolerance_text(tx, tol))
    return Question("what_if", NUMBER, in_head(walk, tx, head, question),
                    tx.t("quiz.what_if.hint" if logits(walk.computed).key == SCALED else "quiz.what_if.hint_path",
                         row_token=rows[row], name=scores_name(unscaled, masked=False)),
                    value, answer_text(value, tol), ("scale_detail",), tolerance=tol,
                    cell=("A", head, row, col), mode="unscaled",
                    given=givens(unscaled, tx, "A", head, row, col), mistakes=found,
                    qid=f"what_if:{head}:{row}:{col}")
