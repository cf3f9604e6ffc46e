"""Predict, then see: `run`/`step --predict` ask before a stage is shown what it will show, then set
the learner's answer beside the truth under the stage. Each is asked before its evidence:

    P      if two tokens traded places, what would happen to X and Z (tutor/wordorder.py): asked
           before the first screen that shows positions, so before X
    QKᵀ    which key the focus row's query will score highest, from Q and K (tokenquiz.look)
    S      the cell the S screen works out, from its QKᵀ (and d_k where S divides by √d_k)
    S + M  a masked weight of A: exactly 0, not small
    A      the cell the A screen works out, from the whole of S on the screen before
    Z      the cell the Z screen works out, from A and the whole of V

A prediction is a quiz Question (tutor/quiz.py), so answers are read and judged as the quiz reads
them: a wrong one gets the mistake it shows named (tutor/mistakes.py), or where none fits, the
cell's worked arithmetic on the stage's screen (a token: the row of scores; an option: why it is
wrong). `Predictor` asks through an AnswerSource (commands/quiz.py: a terminal, or lines piped on
stdin, one a prediction; an empty line skips) and prints on a console; `before` and `after` are
called around each stage by the printed walk. The interactive walk (app/walk.py) asks and judges
through `StepPredictions`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
from rich.console import Console
from rich.text import Text

from attnwalk.layer.axes import axes, default_cell
from attnwalk.layer.roles import MIXED, SCALED, SCORES, SOFTMAX, masked_view
from attnwalk.layer.walk import Walk
from attnwalk.text import text
from attnwalk.tutor.cellquiz import GIVEN_MAX, cell_question, matrix, scores_name
from attnwalk.tutor.quiz import CHOICE, NUMBER, TOKEN, Question, check, diagnosis, number_text, parse_choice, tolerance_text
from attnwalk.tutor.predictcells import cells, shown_before, worked_line
from attnwalk.tutor.tokenquiz import look_question
from attnwalk.tutor.wordorder import word_order_question

STAGES = ("P", SCORES, SCALED, SOFTMAX, MIXED)  # and the masked view (S + M) where there is one


def prediction(walk: Walk, key: str, head: int = 0, lang: str = "en") -> Question | None:
    """The prediction asked before stage `key` of head `head`, or None for a stage without one."""
    masked = masked_view(walk.computed)
    asked = STAGES + ((masked.key,) if masked is not None else ())
    if key not in asked or key not in (s.key for s in walk.stages):
        return None
    tx = text(lang)
    scn = walk.scenario
    row = default_cell(walk, "A", head)[0]
    if key == "P":
        q = word_order_question(walk, tx, random.Random(scn.name))
    elif key == "QK^T":
        q = look_question(walk, tx, head, row)
    elif masked is not None and key == masked.key:
        q = _masked(walk, head, row, lang)
    else:
        q = _cell(walk, key, head, lang)
    return None if q is None else replace(q, qid=f"predict:{key}:{q.qid}")


def _masked(walk: Walk, head: int, row: int, lang: str) -> Question | None:
    """"What will A[T2, T3] be?" for a key the mask hides: the focus row's highest-scoring one."""
    scn = walk.scenario
    rows = [row] + [r for r in range(scn.n) if r != row]
    r = next((r for r in rows if not scn.allowed[r].all()), None)
    if r is None:
        return None
    S = walk.scores(head)[r]
    c = int(np.argmax(np.where(scn.allowed[r], -np.inf, S)))
    q = cell_question(walk, "A", r, c, head, lang, given=False)
    if q is None:
        return None
    tx = text(lang)
    rows_, cols = axes(walk, walk.stage("A"), head, lang)
    return replace(q, text=tx.t("quiz.predict.masked", row_token=rows_[r], col_token=cols[c],
                                tol=tolerance_text(tx, q.tolerance)))


def _cell(walk: Walk, key: str, head: int, lang: str) -> Question | None:
    """The cell stage `key`'s screen works out, asked from what the screens before it show; where
    a misconception gives its number or the screens before already show it, the nearest cell
    where neither is so (predictcells.py)."""
    tx = text(lang)
    scn = walk.scenario
    for row, col in cells(walk, key, head):
        q = cell_question(walk, key, row, col, head, lang, given=False)
        if q is not None and not shown_before(walk, key, float(q.answer), lang):
            break
    else:
        return None
    rows, cols = axes(walk, walk.stage(key), head, lang)
    mats = walk.heads[head].mats
    values = {"row_token": rows[row], "col_token": cols[col], "col": cols[col],
              "tol": tolerance_text(tx, q.tolerance), "d_k": scn.d_k,
              "value": number_text(float(mats[SCORES][row, col])) if key == SCALED else "",
              "mode": tx.t(f"mode.{walk.mode.name}.name"), "name": scores_name(walk)}
    if key == SCALED:  # one rule for whether S divides: Mode.scales (additive scores never do)
        name = ("quiz.predict.s" if walk.mode.scales(scn.scorer) else
                "quiz.predict.s_additive" if not scn.scorer.divides else "quiz.predict.s_mode")
    elif key == SOFTMAX:
        name = "quiz.predict.a"
    else:
        V = mats[walk.stage(MIXED).keys[0]]  # what Z mixes: V
        small = scn.m <= GIVEN_MAX and V.shape[1] <= GIVEN_MAX
        name = "quiz.predict.z" if small else "quiz.predict.z_large"
        keys = axes(walk, walk.stage(SOFTMAX), head, lang)[1]
        values.update(v=matrix(V), rows=tx.t("ui.list_sep").join(keys))
    return replace(q, text=tx.t(name, **values))


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
    tally: "Tally" = field(default_factory=lambda: Tally())

    def before(self, key: str, head: int) -> None:
        """Ask for the prediction of stage `key` (printed walk: above the stage's screen)."""
        q = self.questions(self.walk, key, head, self.lang)
        if q is None or self.stopped or (key, head) in self.asked:
            return
        self.asked.add((key, head))
        tx = text(self.lang)
        self.console.print(Text(tx.t("quiz.predict.before", stage=self.walk.stage(key).symbol), style="bold cyan"))
        self.console.print(Text(q.text))
        if q.given:
            self.console.print(Text(q.given, style="dim"))
        for letter, option in zip("abc", q.choices):
            self.console.print(Text(f"  {letter}) {option}"))
        raw = self.answers.ask(tx.t("quiz.choose", choices="a/b/c") if q.kind == CHOICE else tx.t("quiz.prompt"))
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
        self.tally.add(q, raw, right)
        return line

    def summary(self) -> str:
        """What the end of the walk says of the predictions ("" where none was asked)."""
        return self.tally.summary(self.lang)


@dataclass
class Tally:
    """The predictions of one walk, for its end: how many were asked, how many right, and the
    mistakes the wrong ones showed, named as the quiz names them."""

    asked: int = 0
    right: int = 0
    mistakes: dict[str, int] = field(default_factory=dict)  # name -> how many predictions showed it

    def add(self, q: Question, raw: str, right: bool | None) -> None:
        self.asked += 1
        self.right += bool(right)
        if right is False:
            for name in mistake_names(q, raw):
                self.mistakes[name] = self.mistakes.get(name, 0) + 1

    def summary(self, lang: str) -> str:
        if not self.asked:
            return ""
        tx = text(lang)
        line = tx.t("quiz.predict.summary", right=self.right, asked=self.asked)
        if self.mistakes:
            names = [mistake_label(name, tx) + (f" ×{n}" if n > 1 else "") for name, n in self.mistakes.items()]
            line += " " + tx.t("quiz.predict.summary_mistakes", mistakes=tx.t("grade.mistake_sep").join(names))
        return line


def mistake_names(q: Question, raw: str) -> list[str]:
    """The misconceptions a wrong prediction shows: the nearest mistake a number or token matches
    (as the quiz names it), or what a wrong option covers."""
    if q.kind == CHOICE:
        return list(q.covers)
    return [name for name, _ in diagnosis(q, raw)[:1]]


def mistake_label(name: str, tx) -> str:
    key = f"quiz.mistake_name.{name}"
    return tx.t(key) if tx.has(key) else name


def judge(walk: Walk, q: Question, raw: str, lang: str = "en") -> tuple[str, bool | None]:
    """"Your prediction: 5.1 · the walk: 5.1526 · right"; a wrong one says so and names the mistake
    it shows ("· wrong: forgot to divide by √d_k"), then how that number comes about, else how to
    get it right; whether it was right (None: skipped, or no answer to it)."""
    tx = text(lang)
    if not raw.strip():
        return tx.t("quiz.predict.skipped", truth=q.shown), None
    right = check(q, raw)
    if right is None:
        return tx.t("quiz.predict.unread", answer=raw.strip(), truth=q.shown), None
    if right:
        verdict = tx.t("quiz.predict.right")
    else:
        names = [mistake_label(name, tx) for name in mistake_names(q, raw) if q.kind != CHOICE]
        verdict = (tx.t("quiz.predict.off_named", mistake=tx.t("grade.mistake_sep").join(names)) if names
                   else tx.t("quiz.predict.off"))
    line = tx.t("quiz.predict.judged", answer=raw.strip(), truth=q.shown, verdict=verdict)
    if right:
        return line, True
    return line + "\n" + "\n".join(_why(walk, q, raw, tx)), False


def _why(walk: Walk, q: Question, raw: str, tx) -> list[str]:
    """What a wrong prediction shows, or where none fits, how the right one is reached."""
    if q.kind == CHOICE:
        return [tx.t("quiz.diagnosis.wrong_option", why=q.why[parse_choice(raw, len(q.choices))])]
    found = diagnosis(q, raw)
    if q.kind == TOKEN:
        shown = [tx.t(f"quiz.diagnosis.{name}", value=q.tokens[int(v)]) for name, v in found]
        return shown or [q.worked]
    if q.cell is None:  # a count (∂L/∂S's zeros, tutor/gradquiz.py): how it is reached
        return [q.worked]
    if found:
        key, head, row, col = q.cell
        rows, cols = axes(walk, walk.stage(key), head, tx.lang)
        return [tx.t(f"quiz.diagnosis.{name}", value=number_text(v), row=rows[row], col=cols[col])
                for name, v in found]
    key, head, row, col = q.cell
    if (row, col) != default_cell(walk, key, head):  # not the screen's worked cell: its arithmetic here
        line = q.worked or worked_line(walk, key, head, row, col, tx.lang)
        if line:
            return [tx.t("quiz.predict.worked_here", line=line)]
    rows, cols = axes(walk, walk.stage(key), head, tx.lang)
    return [tx.t("quiz.predict.see_worked", stage=walk.stage(key).symbol, row_token=rows[row], col=cols[col])]


class StepPredictions:
    """The interactive walk's asking and judging, handed to the app by commands/walk.py (so app/
    needs no more of tutor/ than this object)."""

    def __init__(self, lang: str = "en", questions: Callable[..., Question | None] = prediction) -> None:
        self.lang = lang
        self.questions = questions  # the backward walk asks its own (tutor/gradquiz.py)
        self.tally = Tally()

    def ask(self, walk: Walk, key: str, head: int) -> Question | None:
        q = self.questions(walk, key, head, self.lang)
        if q is not None and q.kind == CHOICE:  # the app's prompt is one line: the options go in it
            options = " ".join(f"{letter}) {option}" for letter, option in zip("abc", q.choices))
            q = replace(q, text=f"{q.text} {options}")
        return q

    def judge(self, walk: Walk, q: Question, raw: str) -> str:
        line, right = judge(walk, q, raw, self.lang)
        self.tally.add(q, raw, right)
        return line

    def summary(self) -> str:
        """The end of the walk's line on the predictions ("" where none was asked)."""
        return self.tally.summary(self.lang)
