"""The quiz as the learner meets it: ask, read an answer, reveal, and a score at the end.

The loop is given its console and its answer source: a terminal prompts and lets a mistyped
answer be typed again; lines piped on stdin answer one question each (a line that cannot be read,
an empty one too, counts as wrong, so answers never shift onto the wrong question; the intro line
says so). The end of input, or q, stops the quiz early; the score of what was answered is still
printed and recorded.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from rich.console import Console
from rich.table import Table
from rich.text import Text

from attnwalk.text import pick, text
from attnwalk.layer.walk import Walk
from attnwalk.tutor.quiz import CHOICE, LETTERS, NUMBER, Question, check, choice_list, counted_wrong, unreadable
from attnwalk.render.options import ViewOptions

QUIT_WORDS = ("q", "quit", "exit", "退出")


class AnswerSource(Protocol):
    interactive: bool  # may a mistyped answer be asked for again?

    def ask(self, prompt: str) -> str | None:
        """The answer typed after `prompt`, or None when input has ended."""


class TerminalAnswers:
    """Answers typed at the terminal, with line editing (CJK input included)."""

    interactive = True

    def __init__(self, console: Console) -> None:
        self.console = console
        try:
            import readline  # noqa: F401  (input() then edits the line: arrows, backspace over CJK)
        except ImportError:  # Windows
            pass

    def ask(self, prompt: str) -> str | None:
        try:
            return self.console.input(Text(prompt, style="bold"))
        except EOFError:
            self.console.print()
            return None


class LineAnswers:
    """One answer per line of `stream` (stdin when it is not a terminal, or a script in tests).

    Each prompt is printed with the answer read after it, so the transcript reads like a session.
    """

    interactive = False

    def __init__(self, stream: IO[str], console: Console) -> None:
        self.stream = stream
        self.console = console

    def ask(self, prompt: str) -> str | None:
        line = self.stream.readline()
        if not line:
            return None
        answer = line.rstrip("\r\n")
        self.console.print(Text(prompt, style="bold") + Text(answer))
        return answer


@dataclass(frozen=True)
class QuizResult:
    score: int
    answered: int
    questions: int
    interrupted: bool = False  # Ctrl-C


def run_quiz(walk: Walk, questions: list[Question], console: Console, answers: AnswerSource,
             lang: str = "en", precision: int = 4) -> QuizResult:
    """Ask every question in turn; returns the score (also printed as "Score: k / N")."""
    tx = text(lang)
    total = len(questions)
    score = answered = 0
    interrupted = False
    console.print(Text(tx.t("quiz.intro" if answers.interactive else "quiz.intro_piped", total=total)))
    try:
        for index, q in enumerate(questions, 1):
            console.print()
            console.print(Text(tx.t("quiz.number", index=index, total=total), style="bold cyan"))
            console.print(Text(q.text))
            if q.choices:
                console.print(_choices(q))
            verdict, read = _answer(q, console, answers, tx)
            if verdict is None:
                break
            answered += 1
            if verdict:
                score += 1
                console.print(Text(tx.t("quiz.correct"), style="bold green"))
                if q.kind == NUMBER:
                    console.print(Text(tx.t("quiz.answer", answer=q.shown)))
            else:
                _reveal(walk, q, console, tx, ViewOptions(precision=precision, lang=lang,
                                                           width=console.width), read)
    except KeyboardInterrupt:
        interrupted = True
        console.print()
    console.print()
    if answered < total:
        console.print(Text(tx.t("quiz.stopped_after", answered=answered, total=total)))
    console.print(Text(tx.t("quiz.score", score=score, total=answered), style="bold"))
    return QuizResult(score, answered, total, interrupted)


def _choices(q: Question) -> Table:
    """The options as "a) …" with wrapped lines indented under their own text."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for letter, choice in zip(LETTERS, q.choices):
        grid.add_row(f"  {letter})", Text(choice))
    return grid


def _answer(q: Question, console: Console, answers: AnswerSource, tx) -> tuple[bool | None, bool]:
    """True or False for the learner's answer (None when they stop: q, end of input), and whether
    it was an answer at all (a piped line that was not is counted wrong, not asked again)."""
    prompt = tx.t("quiz.choose", choices=choice_list(q)) if q.kind == CHOICE else tx.t("quiz.prompt")
    while True:
        raw = answers.ask(prompt)
        if raw is None:
            return None, True
        verdict = check(q, raw)
        if verdict is None and raw.strip().casefold() in QUIT_WORDS:
            return None, True
        if verdict is not None:
            return verdict, True
        if not answers.interactive:
            console.print(Text(counted_wrong(q, raw, tx), style="yellow"))
            return False, False
        console.print(Text(unreadable(q, tx, raw), style="yellow"))


def _reveal(walk: Walk, q: Question, console: Console, tx, opts: ViewOptions, read: bool = True) -> None:
    """After a wrong answer: the hint, the worked arithmetic and the right answer. ("Not quite"
    only when there was an answer to be not quite right.)"""
    console.print(Text(tx.t("quiz.wrong" if read else "quiz.hint", hint=q.hint), style="yellow"))
    if q.cell is not None:
        from attnwalk.render.worked import worked_cell

        key, head, row, col = q.cell
        console.print(worked_cell(walk, key, row, col, head, opts))
    elif q.worked:
        console.print(Text(q.worked))
    console.print(Text(tx.t("quiz.answer", answer=q.shown), style="bold"))


def quiz_command(*, name: str | None, scenario_file: Path | None, count: int | None,
                 seed: int | None, lang: str | None) -> int:
    """`attnwalk quiz`: build the quiz, run it on the terminal or on piped lines, record it."""
    from attnwalk.text import detect_lang
    from attnwalk.layer.walk import compute
    from attnwalk.tutor.progress import Progress, scenario_key
    from attnwalk.tutor.quiz import questions
    from attnwalk.scenario.model import load_scenario
    from attnwalk.terminal.console import make_console
    from attnwalk.commands.walk import scenario_arg

    lang = detect_lang(lang)
    scenario = load_scenario(scenario_arg(name, scenario_file))
    walk = compute(scenario)
    whole = questions(walk, lang, seed=seed)
    asked = whole[:count] if count is not None else whole
    console = make_console()
    title = pick(scenario.title, lang)
    console.print(Text(text(lang).t("quiz.title", name=scenario.name), style="bold"))
    if title:
        console.print(Text(title, style="dim"))
    answers = TerminalAnswers(console) if sys.stdin.isatty() else LineAnswers(sys.stdin, console)
    result = run_quiz(walk, asked, console, answers, lang)
    if result.answered:
        Progress().record_quiz(scenario_key(scenario), result.score, result.answered, result.questions,
                               full=len(whole))
    return 130 if result.interrupted else 0
