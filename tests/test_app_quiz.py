"""The interactive quiz (attnwalk/app/quiz.py) driven by Textual's pilot: commands/quiz.run_quiz
runs in the app's worker and asks through its input line.

Golden numbers: QKᵀ[撩, 女生] = q_撩 · k_女生 = 0.3274 × 1.6 + 1.2872 × 3.1 = 4.5142 from the
lesson's 4 decimals (lesson 002); its shape is 3 × 3 (three tokens)."""

from __future__ import annotations

import asyncio

import pytest
from rich.text import Text

from appdriver import screen_text
from attnwalk.app.quiz import QuizApp
from attnwalk.commands.quiz import run_quiz
from attnwalk.layer.walk import compute
from attnwalk.render.options import ViewOptions
from attnwalk.scenario.builtins import builtin_names
from attnwalk.scenario.load import load_scenario
from attnwalk.tutor.questions import questions


async def _settle(pilot, app, until) -> None:
    """Let the quiz's thread print and ask: wait until `until(app)` (at most ~5 s)."""
    for _ in range(100):
        await pilot.pause(0.05)
        if until(app):
            return


def quiz(answers: list[str], count: int = 2, lang: str = "en", finish: bool = True, size=(100, 40)):
    walk = compute(load_scenario("girl_bangs"))
    asked = questions(walk, lang)[:count]

    async def run():
        app = QuizApp(lambda console, source: run_quiz(walk, asked, console, source, lang),
                      ViewOptions(lang=lang), [Text("Quiz: girl_bangs")])
        async with app.run_test(size=size) as pilot:
            for answer in answers:
                await _settle(pilot, app, lambda a: a.waiting)
                if answer == "ctrl+c":
                    await pilot.press("ctrl+c")
                    continue
                await pilot.press(*answer, "enter")
            await _settle(pilot, app, lambda a: a.result is not None)
            shown = screen_text(app) if app.return_code is None else ""
            if finish and app.return_code is None:
                await pilot.press("enter")  # the quiz is over: Enter closes it
                await pilot.pause()
        return app, shown

    return asyncio.run(run())


def test_the_right_answers_score_and_the_log_shows_the_verdicts() -> None:
    assert abs(0.3274 * 1.6 + 1.2872 * 3.1 - 4.514) < 1e-3  # the lesson's numbers, by hand
    app, shown = quiz(["4.514", "3x3"])
    assert app.result.score == 2 and app.result.answered == 2
    assert "Question 1 / 2" in shown and "What is QKᵀ[2, 1]" in shown
    assert "> 4.514" in shown and shown.count("Correct!") == 2
    assert "Score: 2 / 2" in shown and "The quiz is over" in shown
    assert app.return_code == 0


def test_a_wrong_number_is_worked_out_and_the_answer_given() -> None:
    app, shown = quiz(["9", "3x3"])
    assert app.result.score == 1 and app.result.missed == (app.result.missed[0],)
    assert "Worked cell: QKᵀ[撩, 女生]" in shown and "Answer: 4.5140" in shown


def test_a_mistyped_answer_is_asked_again_not_counted() -> None:
    app, shown = quiz(["abc", "4.514", "3x3"])
    assert app.result.score == 2 and app.result.answered == 2


def test_q_stops_the_quiz_closes_it_and_keeps_what_was_answered() -> None:
    app, shown = quiz(["4.514", "q"])
    assert app.result.answered == 1 and app.result.score == 1
    assert app.return_code == 0 and shown == ""  # closed at once: the command prints the score


def test_ctrl_c_stops_with_130_and_the_score_so_far() -> None:
    app, _ = quiz(["4.514", "ctrl+c"])
    assert app.return_code == 130
    assert app.result is not None and app.result.interrupted and app.result.answered == 1


def test_the_quiz_speaks_chinese() -> None:
    app, shown = quiz(["4.514", "3x3"], lang="zh")
    assert "测验结束" in shown and app.result.score == 2


def test_the_worked_answer_keeps_its_box_whole_at_80_columns() -> None:
    """RichLog renders at least 78 cells by default, more than its content at 80 columns: the right
    edge of every panel (│ and ╯) was cut off."""
    app, shown = quiz(["1", "3x3"], size=(80, 24), finish=False)
    lines = shown.splitlines()
    boxed = [line for line in lines if line.lstrip().startswith("│")]
    assert boxed, shown  # a worked answer in a box is on screen
    assert all(line.rstrip().rstrip("▁▂▃▄▅▆▇█").rstrip().endswith("│") for line in boxed), shown


def test_at_80x24_the_verdict_and_the_next_question_are_both_in_view() -> None:
    """A new user answered 6.2388 (QKᵀ[女生, 撩], across the diagonal) at 80 × 24: the log
    jumped to the end of the worked cell and question 2, the verdict out of view, and no key
    scrolled back. Then the view started at the answer, but the screen ended on "Your answer to
    question 2:" without question 2's text (issue 28). Now the view starts at the answer and
    question 2 is kept above the answer line while the log does not reach it; PgDn reads on
    (the question then in the log, once), PgUp goes back."""
    walk = compute(load_scenario("girl_bangs"))
    asked = questions(walk, "en")[:2]
    second = asked[1].text

    async def run():
        app = QuizApp(lambda console, source: run_quiz(walk, asked, console, source, "en"),
                      ViewOptions(), [Text("Quiz: girl_bangs")])
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(pilot, app, lambda a: a.waiting)
            await pilot.pause()
            first = screen_text(app)
            await pilot.press(*"6.2388", "enter")
            await _settle(pilot, app, lambda a: a.waiting)
            await pilot.pause()
            after_answer = screen_text(app)
            for _ in range(3):
                await pilot.press("pagedown")
            await pilot.pause()
            read_on = screen_text(app)
            for _ in range(6):
                await pilot.press("pageup")
            await pilot.pause()
            back = screen_text(app)
            await pilot.press("escape")
            await _settle(pilot, app, lambda a: a.result is not None)
        return first, after_answer, read_on, back

    first, after_answer, read_on, back = asyncio.run(run())
    assert first.count("Question 1 / 2") == 1  # in the log's view: not kept twice
    lines = after_answer.splitlines()
    assert "> 6.2388" in lines[0] and "Not quite" in after_answer  # the view starts at the answer
    assert "Question 2 / 2" in after_answer and second[:30] in " ".join(after_answer.split())
    assert lines[-2].strip() == "Your answer to question 2:"  # the question right above the answer line
    assert after_answer.index("Question 2 / 2") > after_answer.index("Not quite")
    assert read_on.count("Question 2 / 2") == 1  # the log reached it: the kept copy has gone
    assert "Quiz: girl_bangs" in back and "Question 2 / 2" in back  # PgUp goes back; question 2 kept
    assert "PgUp/PgDn scroll" in after_answer.splitlines()[-1]


def _wrong(q) -> str:
    """An answer a learner might give that is wrong: a known mistake's number where the question
    has one (so the diagnosis and its worked cell are printed), another token, shape or option."""
    from attnwalk.tutor.quiz import CHOICE, LETTERS, NUMBER, SHAPE, TOKEN

    if q.kind == NUMBER:
        return f"{q.mistakes[0][1]:.4f}" if q.mistakes else f"{float(q.answer) * 3 + 7:.4f}"
    if q.kind == TOKEN:
        return str(next(i + 1 for i in range(len(q.tokens)) if i != q.answer))
    if q.kind == SHAPE:
        return "1x1" if tuple(q.answer) != (1, 1) else "2x2"
    assert q.kind == CHOICE
    return next(LETTERS[i] for i in range(len(q.choices)) if i != q.answer)


@pytest.mark.parametrize("name", builtin_names())
def test_after_every_wrong_answer_the_question_asked_is_on_screen_at_80x24(name: str) -> None:
    """The issue's test of done (issue 28): every built-in's first questions answered wrong at
    80 × 24 (a known mistake where there is one: the diagnosis and a worked cell fill the log),
    and each time the quiz asks again, the text of the question it asks is on the screen."""
    import re

    lang = "zh" if builtin_names().index(name) % 2 else "en"  # both languages, half each
    walk = compute(load_scenario(name))
    asked = questions(walk, lang)[:5]

    async def run():
        app = QuizApp(lambda console, source: run_quiz(walk, asked, console, source, lang),
                      ViewOptions(lang=lang), [Text(f"Quiz: {name}")])
        seen = []
        async with app.run_test(size=(80, 24)) as pilot:
            for _ in range(12):
                await _settle(pilot, app, lambda a: a.waiting or a.result is not None)
                if app.result is not None:
                    break
                await pilot.pause()
                prompt = str(app.query_one("#prompt-label").content)
                number = int(re.search(r"(\d+)", prompt).group(1))
                seen.append((number, screen_text(app)))
                await pilot.press(*_wrong(asked[number - 1]), "enter")
            await pilot.press("escape")
            await _settle(pilot, app, lambda a: a.result is not None)
        return seen

    seen = asyncio.run(run())
    assert len(seen) >= len(asked)  # every question asked (an option twice)
    for number, screen in seen:
        text = "".join(asked[number - 1].text.split())
        assert text[:24] in "".join(screen.split()), f"{name} ({lang}): question {number} not on screen\n{screen}"
