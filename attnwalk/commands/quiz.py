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

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from attnwalk.text import pick, text
from attnwalk.layer.walk import Walk
from attnwalk.tutor.quiz import (CHOICE, LETTERS, NUMBER, TOKEN, Question, check, choice_list, counted_wrong,
                                 diagnosis, number_text, parse_choice, unreadable)
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import Prose, prose_line

QUIT_WORDS = ("q", "quit", "exit", "退出")
MAX_ANSWER = 4096  # characters in one answer line: a number, a token, a letter; a flood is not read whole


class AnswerSource(Protocol):
    interactive: bool  # may a mistyped answer be asked for again?

    def ask(self, prompt: str, question: RenderableType | None = None) -> str | None:
        """The answer typed after `prompt`, or None when input has ended. `question` is what was
        just printed of the question being answered, for a source that keeps it in view (the
        app's); the others have printed it already."""


class TerminalAnswers:
    """Answers typed at the terminal, with line editing (CJK input included)."""

    interactive = True

    def __init__(self, console: Console, lang: str = "en") -> None:
        self.console, self.lang = console, lang
        try:
            import readline  # noqa: F401  (input() then edits the line: arrows, backspace over CJK)
        except ImportError:  # Windows
            pass

    def ask(self, prompt: str, question: RenderableType | None = None) -> str | None:
        try:
            answer = self.console.input(Text(prompt, style="bold"))
        except EOFError:
            self.console.print()
            return None
        if len(answer) > MAX_ANSWER:  # read whole by the terminal already; not an answer
            self.console.print(prose_line(text(self.lang).t("quiz.too_long", limit=f"{MAX_ANSWER:,}"),
                                          style="yellow"))
            return ""
        return answer


class LineAnswers:
    """One answer per line of `stream` (stdin when it is not a terminal, or a script in tests).

    Each prompt is printed with the answer read after it, so the transcript reads like a session.
    """

    interactive = False

    def __init__(self, stream: IO[str], console: Console, lang: str = "en") -> None:
        self.stream = stream
        self.console, self.lang = console, lang

    def ask(self, prompt: str, question: RenderableType | None = None) -> str | None:
        line = self.stream.readline(MAX_ANSWER + 1)
        if not line:
            return None
        if len(line) > MAX_ANSWER and not line.endswith("\n"):  # longer than any answer
            while True:  # the rest of it read and dropped a piece at a time: memory stays small
                rest = self.stream.readline(1 << 16)
                if not rest or rest.endswith("\n"):
                    break
            self.console.print(Text(prompt, style="bold") + Text(line[:40] + "…"))
            self.console.print(prose_line(text(self.lang).t("quiz.too_long", limit=f"{MAX_ANSWER:,}"),
                                          style="yellow"))
            return ""
        answer = line.rstrip("\r\n")
        self.console.print(Text(prompt, style="bold") + Text(answer))
        return answer


@dataclass(frozen=True)
class QuizResult:
    score: int
    answered: int
    questions: int
    interrupted: bool = False  # Ctrl-C
    missed: tuple[str, ...] = ()  # the qid of each question answered wrong (for --review)
    shown: tuple[str, ...] = ()  # the misconceptions the wrong answers showed, in order, once each


def run_quiz(walk: Walk, questions: list[Question], console: Console, answers: AnswerSource,
             lang: str = "en", precision: int = 4) -> QuizResult:
    """Ask every question in turn; returns the score (also printed as "Score: k / N").

    A wrong number that matches a known mistake gets that mistake named and the step done right;
    a wrong option gets why it is wrong and one more try (a right second try teaches, but is not
    scored: the score says what was known before the explanation)."""
    tx = text(lang)
    total = len(questions)
    score = answered = 0
    interrupted = False
    missed: list[str] = []
    shown: list[str] = []
    opts = ViewOptions(precision=precision, lang=lang, width=console.width)
    console.print(prose_line(tx.t("quiz.intro" if answers.interactive else "quiz.intro_piped", total=total)))
    try:
        for index, q in enumerate(questions, 1):
            console.print()
            asked = _question(q, tx, index, total)
            for part in asked:
                console.print(part)
            verdict, read, raw = _answer(q, console, answers, tx, index, Group(*asked))
            if verdict is None:
                break
            answered += 1
            if verdict:
                score += 1
                console.print(prose_line(tx.t("quiz.correct"), style="bold green"))
                if q.kind == NUMBER:
                    console.print(prose_line(tx.t("quiz.answer", answer=q.shown)))
                continue
            missed.append(q.qid)
            if q.kind == CHOICE and read:
                _add(shown, q.covers)
                if not _retry(walk, q, raw, console, answers, tx, opts, index, total):
                    break
            elif q.kind in (NUMBER, TOKEN) and read and _diagnosed(walk, q, raw, console, tx, opts, shown):
                pass
            else:
                _reveal(walk, q, console, tx, opts, read)
    except KeyboardInterrupt:
        interrupted = True
        console.print()
    console.print()
    if answered < total:
        console.print(prose_line(tx.t("quiz.stopped_after", answered=answered, total=total)))
    console.print(prose_line(tx.t("quiz.score", score=score, total=answered), style="bold"))
    return QuizResult(score, answered, total, interrupted, tuple(missed), tuple(shown))


def _add(shown: list[str], names) -> None:
    shown.extend(name for name in names if name not in shown)


def _question(q: Question, tx, index: int, total: int) -> list[RenderableType]:
    """The question as it is asked: its number, its text, what is given, the options."""
    parts: list[RenderableType] = [prose_line(tx.t("quiz.number", index=index, total=total), style="bold cyan"),
                                   prose_line(q.text)]
    if q.given:
        parts.append(prose_line(q.given, style="dim"))
    if q.choices:
        parts.append(_choices(q))
    return parts


def _retry(walk: Walk, q: Question, raw: str, console: Console, answers: AnswerSource, tx,
           opts: ViewOptions, index: int = 0, total: int = 0) -> bool:
    """Why the chosen option is wrong, then one more try; the answer if that is wrong too.
    False when the learner stopped instead of trying again."""
    chosen = parse_choice(raw, len(q.choices))
    console.print(prose_line(tx.t("quiz.diagnosis.wrong_option", why=q.why[chosen]), style="yellow"))
    console.print(prose_line(tx.t("quiz.diagnosis.retry")))
    again, read, _ = _answer(q, console, answers, tx, index, Group(*_question(q, tx, index, total)))
    if again:
        console.print(prose_line(tx.t("quiz.diagnosis.second_try"), style="green"))
        return True
    _reveal(walk, q, console, tx, opts, read and again is not None)
    return again is not None


def _diagnosed(walk: Walk, q: Question, raw: str, console: Console, tx, opts: ViewOptions,
               shown: list[str]) -> bool:
    """When a wrong answer is what a known mistake gives: that mistake named, the cell worked out
    right (a token: the row it is read from), the answer. False (nothing printed) when it matches
    none."""
    found = diagnosis(q, raw)
    if not found:
        return False
    from attnwalk.layer.axes import axes

    if q.kind == TOKEN:
        said = [tx.t(f"quiz.diagnosis.{name}", value=q.tokens[int(value)]) for name, value in found]
    else:
        key, head, row, col = q.cell
        rows, cols = axes(walk, walk.stage(key), head, tx.lang)
        said = [tx.t(f"quiz.diagnosis.{name}", value=number_text(value), row=rows[row], col=cols[col])
                for name, value in found]
    console.print(prose_line(tx.t("quiz.diagnosis.not_quite"), style="yellow"))
    for line in said:
        console.print(prose_line(line, style="yellow"))
    _add(shown, [name for name, _ in found])
    console.print(prose_line(tx.t("quiz.diagnosis.done_right"), style="bold"))
    if q.cell is not None:
        _worked(walk, q, console, opts)
    else:
        console.print(prose_line(q.worked))
    console.print(prose_line(tx.t("quiz.answer", answer=q.shown), style="bold"))
    return True


def _worked(walk: Walk, q: Question, console: Console, opts: ViewOptions) -> None:
    from attnwalk.render.worked import worked_cell
    from attnwalk.layer.walk import with_mode

    key, head, row, col = q.cell
    shown_walk = with_mode(walk, q.mode) if q.mode else walk
    console.print(worked_cell(shown_walk.view(head), key, row, col, opts))


def _choices(q: Question) -> Table:
    """The options as "a) …" with wrapped lines indented under their own text."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for letter, choice in zip(LETTERS, q.choices):
        grid.add_row(f"  {letter})", Prose(choice))
    return grid


def _answer(q: Question, console: Console, answers: AnswerSource, tx,
            index: int = 0, question: RenderableType | None = None) -> tuple[bool | None, bool, str]:
    """True or False for the learner's answer (None when they stop: q, end of input), whether
    it was an answer at all (a piped line that was not is counted wrong, not asked again), and
    the line typed. At a terminal the prompt names question `index`: in the app the question
    may be below the verdict still in view, so "Your answer:" alone did not say to what."""
    numbered = answers.interactive and index > 0
    if q.kind == CHOICE:
        prompt = tx.t("quiz.choose_n" if numbered else "quiz.choose", choices=choice_list(q), index=index)
    else:
        prompt = tx.t("quiz.prompt_n" if numbered else "quiz.prompt", index=index)
    while True:
        raw = answers.ask(prompt, question)
        if raw is None:
            return None, True, ""
        verdict = check(q, raw)
        if verdict is None and raw.strip().casefold() in QUIT_WORDS:
            return None, True, raw
        if verdict is not None:
            return verdict, True, raw
        if not answers.interactive:
            console.print(prose_line(counted_wrong(q, raw, tx), style="yellow"))
            return False, False, raw
        console.print(prose_line(unreadable(q, tx, raw), style="yellow"))


def _reveal(walk: Walk, q: Question, console: Console, tx, opts: ViewOptions, read: bool = True) -> None:
    """After a wrong answer: the hint, the worked arithmetic and the right answer. ("Not quite"
    only when there was an answer to be not quite right.)"""
    console.print(prose_line(tx.t("quiz.wrong" if read else "quiz.hint", hint=q.hint), style="yellow"))
    if q.cell is not None:
        _worked(walk, q, console, opts)
    elif q.worked:
        console.print(prose_line(q.worked))
    console.print(prose_line(tx.t("quiz.answer", answer=q.shown), style="bold"))


def quiz_command(*, name: str | None, scenario_file: Path | None, count: int | None,
                 seed: int | None, lang: str | None, format: str | None = None,
                 review: bool = False, scenario=None, write=None) -> int:
    """`attnwalk quiz`: build the quiz, print it as a worksheet (--format), or run it on the
    terminal or on piped lines and record it; --review asks the questions missed last time.
    `write` takes the worksheet instead of stdout (`attnwalk model --quiz --format json -o FILE`)."""
    from attnwalk.errors import UsageError
    from attnwalk.text import detect_lang
    from attnwalk.tutor.progress import Progress, scenario_key
    from attnwalk.tutor.questions import questions
    from attnwalk.terminal.console import interactive, make_console
    from attnwalk.commands.walk import chosen_scenario

    lang = detect_lang(lang)
    if format is not None and format.strip().lower() not in ("json", "markdown", "md"):
        raise UsageError(f"unknown --format '{format}'; choose json or markdown")
    scenario = chosen_scenario(name, scenario_file, scenario)  # `attnwalk model --quiz` gives its own
    walk = quiz_walk(scenario)
    key = scenario_key(scenario)
    store = Progress()
    missed: list[str] | None = None
    if review:
        last = store.last_quiz(key)
        seed = last.get("seed") if isinstance(last.get("seed"), int) else None
        listed = last.get("missed")
        missed = [m for m in listed if isinstance(m, str)] if isinstance(listed, list) else []
    whole = questions(walk, lang, seed=seed)
    asked = whole[:count] if count is not None else whole
    if missed is not None:
        asked = [q for q in whole if q.qid in missed][:count]
    if format is not None:
        from attnwalk.terminal.streams import write_out
        from attnwalk.tutor.worksheet import as_json, as_markdown

        as_json_sheet = format.strip().lower() == "json"
        sheet = (as_json if as_json_sheet else as_markdown)(asked, lang, scenario.name, seed)
        sheet = sheet if sheet.endswith("\n") else sheet + "\n"
        if write is not None:  # `attnwalk model --quiz --format … -o FILE`
            write(sheet)
        else:
            write_out(sheet, json=as_json_sheet)  # as stdout can hold it
        return 0
    console = make_console()
    tx = text(lang)
    title = pick(scenario.title, lang)
    intro = [Text(tx.t("quiz.title", name=scenario.name), style="bold")]
    if title:
        intro.append(Text(title, style="dim"))
    if missed is not None:
        if not asked:
            console.print(*intro, prose_line(tx.t("quiz.review.none", name=scenario.name)), sep="\n")
            return 0
        intro.append(prose_line(tx.t("quiz.review.intro", count=len(asked))))
    if interactive():
        result, code = _quiz_app(walk, asked, intro, lang)
        if result is not None:  # the score, on the terminal the app leaves behind it
            console.print(intro[0])
            if result.answered < result.questions:
                console.print(prose_line(tx.t("quiz.stopped_after", answered=result.answered, total=result.questions)))
            console.print(prose_line(tx.t("quiz.score", score=result.score, total=result.answered), style="bold"))
    else:
        for line in intro:
            console.print(line)
        answers = TerminalAnswers(console, lang) if sys.stdin.isatty() else LineAnswers(sys.stdin, console, lang)
        result = run_quiz(walk, asked, console, answers, lang)
        code = 130 if result.interrupted else 0
    if result is not None and result.answered:
        store.record_quiz(key, result.score, result.answered, result.questions, full=len(whole),
                          seed=seed, missed=result.missed, shown=result.shown)
    return code


def quiz_walk(scenario) -> Walk:
    """The walk a quiz asks about, refused first if the quiz would cost too much."""
    from attnwalk.layer.walk import compute
    from attnwalk.scenario.limits import check_work

    check_work(scenario, 2, "the quiz computes the walk, and the layer again in another mode for the "
               "mistakes it names")
    return compute(scenario)


def _quiz_app(walk: Walk, asked: list[Question], intro: list[Text], lang: str) -> tuple[QuizResult | None, int]:
    """The quiz in a terminal, as a Textual app (app/quiz.py) running this module's run_quiz."""
    from attnwalk.app.quiz import QuizApp

    app = QuizApp(lambda console, answers: run_quiz(walk, asked, console, answers, lang),
                  ViewOptions(lang=lang), intro)
    app.run()
    return app.result, app.return_code or 0
