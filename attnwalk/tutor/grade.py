"""A class's worksheet answers marked as the quiz marks one learner's: each answer judged by the
quiz's own judging (quiz.check: right, wrong, or no answer of that kind; mistakes.diagnose: the
misconceptions a wrong number matches; a wrong option shows what its question covers, as
commands/quiz.run_quiz records it), then counted per student, per question and per misconception.
Pure: no files, no printing (sheetfiles.py reads, gradeview.py shows).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from attnwalk.text import text
from attnwalk.tutor.mistakes import diagnose
from attnwalk.tutor.quiz import CHOICE, NUMBER, Question, check, counted_wrong, parse_number
from attnwalk.tutor.sheetfiles import Answers, Worksheet


@dataclass(frozen=True)
class Judged:
    right: bool
    answered: bool  # the cell was not empty
    shown: tuple[str, ...] = ()  # the misconceptions a wrong answer shows
    reason: str = ""  # why an answer that is no answer of the question's kind counts as wrong


@dataclass(frozen=True)
class Answer:
    """One cell of the class's grid: a student's answer to a question, as judged."""

    question: int  # from 1
    answer: str  # as the teacher's file has it
    right: bool
    answered: bool
    shown: tuple[str, ...] = ()  # the misconceptions it shows


@dataclass
class StudentResult:
    student: str
    score: int
    of: int
    mistakes: dict[str, int]  # misconception -> on how many questions
    unread: list[tuple[int, str, str]] = field(default_factory=list)  # (question, answer, reason)
    answers: list[Answer] = field(default_factory=list)  # one a question, in the file's order


@dataclass
class QuestionResult:
    number: int
    right: int
    answered: int
    answer: str  # the right answer as the worksheet's key shows it
    topic: str = ""  # what it asks about: the quiz's topic, and the stage of a cell ("cell QK^T")


@dataclass
class Misconception:
    name: str
    students: int  # how many students showed it
    questions: list[int]  # on which questions, from 1


@dataclass
class ClassReport:
    scenario: str
    seed: int | None
    students: list[StudentResult]
    questions: list[QuestionResult]
    mistakes: list[Misconception]  # most common first
    note: str = ""


def judged(q: Question, raw: str, lang: str = "en") -> Judged:
    """One answer, as the quiz judges it (an empty cell: not answered)."""
    if not raw.strip():
        return Judged(False, False)
    verdict = check(q, raw)
    if verdict is None:
        return Judged(False, True, reason=counted_wrong(q, raw, text(lang)))
    if verdict:
        return Judged(True, True)
    if q.kind == CHOICE:
        return Judged(False, True, q.covers)
    if q.kind == NUMBER and q.mistakes:
        found = diagnose(list(q.mistakes), parse_number(raw), q.tolerance, float(q.answer))
        # the nearest only, as the quiz names it to the learner: one wrong answer, one misconception
        return Judged(False, True, tuple(name for name, _ in found[:1]))
    return Judged(False, True)


def topic(q: Question) -> str:
    """The question's topic as the worksheet names it, with the stage a cell question is on
    (its id "cell:QK^T:0:3:0"): "cell QK^T", "softmax_axis", "what_if"."""
    parts = q.qid.split(":")
    if q.topic == "cell" and len(parts) > 1 and parts[0] == "cell" and parts[1]:
        return f"cell {parts[1]}"
    return q.topic


def grade(sheet: Worksheet, answers: Answers, lang: str = "en") -> ClassReport:
    questions = {n: QuestionResult(n, 0, 0, sheet.questions[n - 1].shown, topic(sheet.questions[n - 1]))
                 for n in answers.numbers}
    showed: dict[str, dict[str, set[int]]] = {}  # misconception -> student -> questions
    students = []
    for student, cells in answers.rows:
        result = StudentResult(student, 0, len(answers.numbers), {})
        for number, raw in zip(answers.numbers, cells):
            verdict = judged(sheet.questions[number - 1], raw, lang)
            asked = questions[number]
            asked.answered += verdict.answered
            asked.right += verdict.right
            result.score += verdict.right
            result.answers.append(Answer(number, raw, verdict.right, verdict.answered,
                                         tuple(dict.fromkeys(verdict.shown))))
            if verdict.reason:
                result.unread.append((number, raw, verdict.reason))
            for name in dict.fromkeys(verdict.shown):
                result.mistakes[name] = result.mistakes.get(name, 0) + 1
                showed.setdefault(name, {}).setdefault(student, set()).add(number)
        students.append(result)
    mistakes = [Misconception(name, len(by), sorted(set().union(*by.values())))
                for name, by in showed.items()]
    # most students first; then the more questions, then by name, so the order is always the same
    mistakes.sort(key=lambda m: (-m.students, -len(m.questions), m.name))
    return ClassReport(sheet.scenario, sheet.seed, students,
                       [questions[n] for n in sorted(questions)], mistakes, answers.note)
