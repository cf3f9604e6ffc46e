"""Predict, then see, on the backward walk; and the quiz's questions on gradients, for a scenario
with a target (features/target.py).

Predictions (`attnwalk grad --predict`, or p in the walk), asked before the screen shows them:
    ∂L/∂S    how many of this head's cells are exactly 0 (the mask's, and rows the loss never reads)
    ∂L/∂W_Q  the cell the screen works out, from the column of X and of ∂L/∂Q it is made of; where
             its number is one of those columns' (a one-hot column of X), an earlier screen's or
             note's, or a mistake's (tutor/gradmistakes.py), the nearest cell where it is none

Quiz questions (`attnwalk quiz`), each a choice whose wrong options are mistakes learners make:
    grad_mask        which cells of ∂L/∂S are exactly 0 whatever the numbers (a mask: the masked ones)
    grad_rows        with an attend target, which rows of ∂L/∂S are 0 (every row it does not ask about)
    grad_transpose   why ∂L/∂K goes through the transpose of ∂L/∂(QKᵀ)
    grad_weights     with an attend target, which weights do not move (W_V, and W_O)
    grad_saturation  why the unscaled layer's loss does not move (only where it is so: the unscaled
                     gradient under 1% of the scaled one at the start)
"""

from __future__ import annotations

import random

import numpy as np

from attnwalk.layer.axes import axes, default_cell, token_labels
from attnwalk.layer.walk import Walk, with_mode
from attnwalk.text import Text, text
from attnwalk.tutor.predict import Predictor, StepPredictions
from attnwalk.tutor.gradmistakes import grad_candidates
from attnwalk.tutor.predictcells import products, shown_before
from attnwalk.tutor.quiz import CHOICE, NUMBER, Question, answer_text, fair, number_text

GIVEN_MAX = 8  # a column longer than this is not written into the question


def grad_prediction(walk: Walk, key: str, head: int = 0, lang: str = "en") -> Question | None:
    """The prediction asked before gradient screen `key` of head `head` (a backward walk), or None."""
    if key not in ("dS", "dW_Q") or not any(s.key == key for s in walk.stages):
        return None
    tx = text(lang)
    M = walk.matrix(key, head)
    if key == "dS":
        zeros = int(np.count_nonzero(M == 0.0))
        return Question("predict", NUMBER, tx.t("quiz.grad_predict.zeros", cells=M.size), "", zeros,
                        str(zeros), tolerance=0.0, qid=f"predict:dS:{head}", worked=_zeros_worked(walk, M, tx))
    X = walk.matrix(walk.stage("Q").reads[0])  # what W_Q multiplies: X (or a norm's output)
    dQ = walk.matrix("dQ")
    if X.shape[0] > GIVEN_MAX:
        return None  # too long to work by hand: the screen shows it
    rows, cols = axes(walk, walk.stage(key), head, lang)
    for row, col in _cells(M, default_cell(walk, key, head)):
        x, g = X[:, row], dQ[:, col]  # dW_Q[row, col] = x · g
        value = float(M[row, col])
        given = (_vector(x), _vector(g))
        if value == 0.0 or number_text(abs(value)) in " ".join(given).replace("-", ""):
            continue  # nothing to work out, or the answer is in the question (x one-hot)
        if shown_before(walk, key, value, lang):
            continue
        judged = fair(value, grad_candidates(walk, key, "W_Q", row, col, x, g))
        if judged is None:
            continue
        tol, found = judged
        worked = f"∂L/∂W_Q[{rows[row]}, {cols[col]}] = {products(x, g)} = {number_text(value)}"
        return Question("predict", NUMBER, tx.t("quiz.grad_predict.weight", row=rows[row], col=cols[col],
                                                x=given[0], g=given[1], tol=f"{tol:g}"),
                        "", value, answer_text(value, tol), tolerance=tol, cell=(key, head, row, col),
                        mistakes=found, worked=worked, qid=f"predict:dW_Q:{row}:{col}")
    return None


def _cells(M: np.ndarray, first: tuple[int, int]) -> list[tuple[int, int]]:
    """The screen's worked cell, then the others, nearest rows first (at most 32)."""
    row = first[0]
    rest = [(r, c) for r in sorted(range(M.shape[0]), key=lambda r: (abs(r - row), r))
            for c in range(M.shape[1]) if (r, c) != first]
    return [first, *rest][:32]


def _zeros_worked(walk: Walk, dS: np.ndarray, tx: Text) -> str:
    """How ∂L/∂S's exact zeros add up: the masked cells (a weight of exactly 0 passes nothing
    back), the rows the softmax passes nothing back through (a row the loss never reads, or one
    with a single key, whose weight is 1 whatever its score), and any others."""
    allowed = walk.scenario.allowed
    zero = dS == 0.0
    masked = int(np.count_nonzero(zero & ~allowed))
    still = np.array([allowed[r].any() and zero[r][allowed[r]].all() for r in range(dS.shape[0])])
    rows = int(np.count_nonzero(zero & allowed & still[:, None]))
    others = int(np.count_nonzero(zero)) - masked - rows
    line = tx.t("quiz.grad_predict.zeros_worked", zeros=int(np.count_nonzero(zero)), masked=masked,
                rows=rows)
    return line + (" " + tx.t("quiz.grad_predict.zeros_others", others=others) if others else "")


def _vector(v: np.ndarray) -> str:
    return "[" + ", ".join(number_text(float(x)) for x in v) + "]"


def GradPredictions(lang: str = "en") -> StepPredictions:
    """The interactive backward walk's asking and judging (app/gradwalk.py): the walk's, asking these."""
    return StepPredictions(lang, questions=grad_prediction)


def GradPredictor(walk: Walk, console, answers, lang: str = "en") -> Predictor:
    """The printed backward walk's predictor: the walk's Predictor, asking these questions."""
    return Predictor(walk, console, answers, lang, questions=grad_prediction)


# -- the quiz -----------------------------------------------------------------------------------------


def grad_questions(walk: Walk, tx: Text, pick: random.Random | None = None) -> list[Question]:
    """The gradient questions for `walk`'s scenario: none without a target."""
    scn = walk.scenario
    target = next((f for f in scn.features if hasattr(f, "loss")), None)
    if target is None:
        return []
    tokens = token_labels(scn.tokens)
    spec = target.target_of(scn)
    asked = tokens[spec.pairs[0][0]] if spec.kind == "attend" else ""
    out = []
    if scn.masked:
        out.append(_choice(tx, "grad_mask", {}))
    if spec.kind == "attend":
        out.append(_choice(tx, "grad_rows", {"query": asked}))
        values = "W_V" + (tx.t("quiz.grad_weights.and_w_o") if scn.W_O is not None else "")
        out.append(_choice(tx, "grad_weights", {"query": asked, "values": values}))
    out.append(_choice(tx, "grad_transpose", {}))
    scaled, unscaled = _gradient_sizes(walk)
    if unscaled < 0.01 * scaled:
        out.append(_choice(tx, "grad_saturation", {"scaled": number_text(scaled),
                                                  "unscaled": number_text(unscaled)}))
    return out


def _gradient_sizes(walk: Walk) -> tuple[float, float]:
    """|∂L/∂W| at the start, scaled and unscaled."""
    from attnwalk.layer.train import gradients

    sizes = []
    for mode in ("scaled", "unscaled"):
        grads = gradients(with_mode(walk, mode))
        sizes.append(float(np.sqrt(sum(np.sum(g * g) for name, g in grads.params.items()
                                       if name in ("W_Q", "W_K", "W_V", "W_O")))))
    return sizes[0], sizes[1]


def _choice(tx: Text, topic: str, values: dict) -> Question:
    """Options in the text's order (answer, wrong_a, wrong_b); the quiz spreads the letters."""
    field = lambda name: tx.t(f"quiz.{topic}.{name}", **values)  # noqa: E731
    return Question(topic, CHOICE, field("question"), field("hint"), 0, field("answer"), (),
                    choices=(field("answer"), field("wrong_a"), field("wrong_b")),
                    why=("", field("why_a"), field("why_b")), qid=topic)
