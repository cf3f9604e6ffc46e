"""Predict, then see: `run`/`step --predict` ask before S, A and Z (and S + M where there is a mask)
are shown, then set the learner's answer beside the truth under the stage.

    S      the value of the cell the S screen works out (its QKᵀ and d_k are on screen already)
    S + M  how many of the focus row's keys the mask sets to −∞
    A      which key the focus row's weight goes to most (its value when two keys tie)
    Z      the value of the cell the Z screen works out (the row of A and the column of V given)

A prediction is a quiz Question (tutor/quiz.py), so answers are read and judged as the quiz reads
them, and a wrong number is diagnosed by the mistake it matches (tutor/mistakes.py). `Predictor`
asks through an AnswerSource (commands/quiz.py: a terminal, or lines piped on stdin, one a
stage; an empty line skips) and prints on a console; `before` and `after` are called around each
stage by the printed walk. The interactive walk (app/walk.py) asks and judges through `StepPredictions`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from rich.console import Console
from rich.text import Text

from attnwalk.layer.axes import axes, default_cell
from attnwalk.layer.walk import Walk
from attnwalk.text import text
from attnwalk.tutor import mistakes
from attnwalk.tutor.quiz import NUMBER, TOKEN, Question, check, number_text, parse_number, tolerance

STAGES = ("S", "S+M", "A", "Z")


def prediction(walk: Walk, key: str, head: int = 0, lang: str = "en") -> Question | None:
    """The prediction asked before stage `key` of head `head`, or None for a stage without one."""
    if key not in STAGES or key not in (s.key for s in walk.stages):
        return None
    tx = text(lang)
    scn = walk.scenario
    row, col = default_cell(walk, key, head)
    rows, cols = axes(walk, walk.stage(key), head, lang)
    mats = walk.heads[head].mats
    if key == "S+M":
        count = int((~scn.allowed[row]).sum())
        return Question("predict", NUMBER, tx.t("quiz.predict.masked", row_token=rows[row]), "", count,
                        str(count), tolerance=0.0, cell=None, qid=f"predict:S+M:{head}:{row}")
    if key == "A":
        A = mats["A"]
        ranked = np.sort(A[row][scn.allowed[row]])[::-1]
        if len(ranked) == 1 or ranked[0] - ranked[1] > 1e-6:
            top = int(np.argmax(np.where(scn.allowed[row], A[row], -np.inf)))
            return Question("predict", TOKEN, tx.t("quiz.predict.top", row_token=rows[row]), "", top,
                            cols[top], tokens=tuple(cols), token_text=scn.key_tokens,
                            qid=f"predict:A:{head}:{row}")
    value = float(walk.matrix(key, head)[row, col])
    tol = tolerance(value)
    if key == "S":  # in the unscaled mode the mode is part of the question: S = QKᵀ there
        asked = tx.t("quiz.predict.s" if walk.mode.divides else "quiz.predict.s_mode",
                     row_token=rows[row], col_token=cols[col], tol=f"{tol:g}",
                     value=number_text(float(mats["QK^T"][row, col])), d_k=scn.d_k,
                     mode=tx.t(f"mode.{walk.mode.name}.name"))
    elif key == "A":
        asked = tx.t("quiz.predict.a", row_token=rows[row], col_token=cols[col], tol=f"{tol:g}")
    else:
        asked = tx.t("quiz.predict.z", row_token=rows[row], col=cols[col], tol=f"{tol:g}",
                     a="[" + ", ".join(number_text(float(x)) for x in mats["A"][row]) + "]",
                     v="[" + ", ".join(number_text(float(x)) for x in mats["V"][:, col]) + "]")
    return Question("predict", NUMBER, asked, "", value, number_text(value), tolerance=tol,
                    cell=(key, head, row, col), mistakes=tuple(mistakes.candidates(walk, key, head, row, col)),
                    qid=f"predict:{key}:{head}:{row}:{col}")


@dataclass
class Predictor:
    """Asks each stage's prediction once and judges it; `judged` keeps (stage key, verdict)."""

    walk: Walk
    console: Console
    answers: object  # commands.quiz.AnswerSource
    lang: str = "en"
    judged: list[tuple[str, bool | None]] = field(default_factory=list)
    pending: dict[tuple[str, int], tuple[Question, str]] = field(default_factory=dict)
    asked: set[tuple[str, int]] = field(default_factory=set)
    stopped: bool = False  # input ended: no more asking
    questions: Callable[..., Question | None] = prediction  # the backward walk asks its own (gradquiz.py)

    def before(self, key: str, head: int) -> None:
        """Ask for the prediction of stage `key` (printed walk: above the stage's screen)."""
        q = self.questions(self.walk, key, head, self.lang)
        if q is None or self.stopped or (key, head) in self.asked:
            return
        self.asked.add((key, head))
        tx = text(self.lang)
        self.console.print(Text(tx.t("quiz.predict.before", stage=self.walk.stage(key).symbol), style="bold cyan"))
        self.console.print(Text(q.text))
        raw = self.answers.ask(tx.t("quiz.prompt"))
        if raw is None:
            self.stopped = True
            return
        self.pending[(key, head)] = (q, raw)

    def after(self, key: str, head: int) -> None:
        """Set the prediction beside the truth (printed walk: below the stage's screen)."""
        if (key, head) in self.pending:
            q, raw = self.pending.pop((key, head))
            self.console.print(Text(self.verdict(q, raw), style="bold"))

    def verdict(self, q: Question, raw: str) -> str:
        line, right = judge(self.walk, q, raw, self.lang)
        self.judged.append((q.qid.split(":")[1], right))
        return line


def judge(walk: Walk, q: Question, raw: str, lang: str = "en") -> tuple[str, bool | None]:
    """"Your prediction: 5.1 · the walk: 5.1526 · right", with the mistake a wrong number shows,
    and whether it was right (None: skipped, or no answer to the question)."""
    tx = text(lang)
    right = check(q, raw) if raw.strip() else None
    if not raw.strip():
        return tx.t("quiz.predict.skipped", truth=q.shown), None
    if right is None:
        return tx.t("quiz.predict.unread", answer=raw.strip(), truth=q.shown), None
    line = tx.t("quiz.predict.judged", answer=raw.strip(), truth=q.shown,
                verdict=tx.t("quiz.predict.right" if right else "quiz.predict.off"))
    if not right and q.kind == NUMBER and q.mistakes:
        found = mistakes.diagnose(list(q.mistakes), parse_number(raw), q.tolerance, float(q.answer))
        if found:
            name, value = found[0]
            key, head, row, col = q.cell
            rows, cols = axes(walk, walk.stage(key), head, lang)
            line += "\n" + tx.t(f"quiz.diagnosis.{name}", value=number_text(value), row=rows[row],
                                col=cols[col])
    return line, right


class StepPredictions:
    """The interactive walk's asking and judging, handed to the app by commands/walk.py (so app/
    needs no more of tutor/ than this object)."""

    def __init__(self, lang: str = "en", questions: Callable[..., Question | None] = prediction) -> None:
        self.lang = lang
        self.questions = questions  # the backward walk asks its own (tutor/gradquiz.py)

    def ask(self, walk: Walk, key: str, head: int) -> Question | None:
        return self.questions(walk, key, head, self.lang)

    def judge(self, walk: Walk, q: Question, raw: str) -> str:
        return judge(walk, q, raw, self.lang)[0]
