"""What a lesson's end page says and offers in a browser (app/ending.py draws it): after the walk,
the predictions summed up, then its quiz, the walk again (predicting, or not) and the next lesson
of the course; after the quiz, its score and the mistakes the wrong answers showed, then the walk,
the quiz again and the next lesson. Every choice is a lesson this server offers."""

from __future__ import annotations

from attnwalk.app.ending import EndingScreen, EndsOnAPage, Next
from attnwalk.app.picker import Choice
from attnwalk.app.quiz import QuizApp
from attnwalk.app.walk import WalkApp
from attnwalk.render.options import ViewOptions
from attnwalk.render.style import say
from attnwalk.serve.lessons import Offered, load
from attnwalk.text import pick


def end_with(app, parts) -> None:
    """Push the end page on `app`; its choice, if one, is passed on as the picker passes its own
    (an open_url the session reads), then the app ends: the session runs what was chosen, else
    the picker."""
    from attnwalk.serve.activity import choice_url

    def chosen(choice: Choice | None) -> None:
        if choice is not None:
            app.open_url(choice_url(choice), new_tab=False)
        app.exit(0)

    app.push_screen(EndingScreen(*parts), chosen)


class ServedWalk(EndsOnAPage, WalkApp):
    """The walk in a browser: n past the last stage opens the end page instead of ending."""

    def __init__(self, walk, opts: ViewOptions, key: str, activity: str, offered: Offered) -> None:
        from attnwalk.tutor.predict import StepPredictions

        self.predictions = StepPredictions(opts.lang)
        super().__init__(walk, opts, predictor=self.predictions, predict=activity == "predict")
        self.key, self.activity, self.offered = key, activity, offered

    def action_next(self) -> None:
        if self.index == len(self.steps) - 1 and not self.ended:
            self.ended = True
            end_with(self, walk_ending(self.walk, self.key, self.activity, self.predictions.summary(),
                                       self.offered, self.opts))
            return
        super().action_next()


class ServedQuiz(EndsOnAPage, QuizApp):
    """The quiz in a browser: when it ends, finished or stopped (q, Esc), the score and the mistakes
    on the end page, then what next."""

    def __init__(self, walk, key: str, offered: Offered, opts: ViewOptions) -> None:
        from rich.text import Text

        from attnwalk.commands.quiz import run_quiz
        from attnwalk.layer.safe import escaped
        from attnwalk.text import text
        from attnwalk.tutor.questions import questions

        asked = questions(walk, opts.lang)
        intro = [Text(text(opts.lang).t("quiz.title", name=walk.scenario.name), style="bold")]
        title = pick(walk.scenario.title, opts.lang)
        if title:
            intro.append(Text(escaped(title), style="dim"))
        super().__init__(lambda console, answers: run_quiz(walk, asked, console, answers, opts.lang), opts, intro)
        self.walk, self.key, self.offered = walk, key, offered

    def finished(self, result) -> None:
        """Stopped (q, Esc): the end page at once. Every question answered: the last verdict stays
        in view until Enter (QuizApp's own way), and Enter opens the end page."""
        if result.interrupted or result.answered == result.questions:
            super().finished(result)
            return
        self.result = result
        self.end_page()

    def end_page(self) -> None:
        if not isinstance(self.screen, EndingScreen):
            end_with(self, quiz_ending(self.walk, self.key, self.result, self.offered, self.opts))

    def on_input_submitted(self, event) -> None:
        # Textual calls QuizApp's handler after this one (handlers run along the MRO) unless the
        # default is prevented: Enter after the last verdict opens the end page instead of exiting
        if not self.waiting and self.result is not None:
            event.prevent_default()
            self.end_page()

    def action_stop(self) -> None:
        if not self.waiting and self.result is not None:
            self.end_page()
            return
        super().action_stop()


def walk_ending(walk, key: str, activity: str, summary: str, offered: Offered, opts: ViewOptions):
    """(title, lines, choices, opts) of the page after the walk's last stage."""
    lang = opts.lang
    lines = [summary] if summary else []
    again = "walk" if activity == "predict" else "predict"
    choices = [Next("t", say(opts, "app.ending.quiz"), say(opts, "app.ending.quiz_short"), Choice(key, "quiz", lang)),
               Next("p" if again == "predict" else "w", say(opts, f"app.ending.{again}"),
                    say(opts, f"app.ending.{again}_short"), Choice(key, again, lang))]
    choices += _following(walk, offered, opts)
    return say(opts, "app.ending.walk_title", name=key), lines, choices, opts


def quiz_ending(walk, key: str, result, offered: Offered, opts: ViewOptions):
    """(title, lines, choices, opts) of the page after the quiz, finished or stopped."""
    from attnwalk.tutor.predict import mistake_label
    from attnwalk.text import text

    tx = text(opts.lang)
    lines = []
    if result.answered < result.questions:
        lines.append(tx.t("quiz.stopped_after", answered=result.answered, total=result.questions))
    lines.append(tx.t("quiz.score", score=result.score, total=result.answered))
    if result.shown:
        shown = tx.t("grade.mistake_sep").join(mistake_label(name, tx) for name in result.shown)
        lines.append(say(opts, "app.ending.mistakes", mistakes=shown))
    elif result.score < result.answered:
        lines.append(say(opts, "app.ending.no_named_mistake"))
    lang = opts.lang
    choices = [Next("w", say(opts, "app.ending.walk"), say(opts, "app.ending.walk_short"), Choice(key, "walk", lang)),
               Next("t", say(opts, "app.ending.quiz_again"), say(opts, "app.ending.quiz_again_short"),
                    Choice(key, "quiz", lang))]
    choices += _following(walk, offered, opts)
    return say(opts, "app.ending.quiz_title", name=key), lines, choices, opts


def _following(walk, offered: Offered, opts: ViewOptions) -> list[Next]:
    """The course's next lesson, where this is a built-in with one and the server offers it."""
    from attnwalk.scenario.builtins import next_lesson

    following = next_lesson(walk.scenario.name) if walk.scenario.builtin else None
    lesson = offered.find(following) if following else None
    if lesson is None:
        return []
    title = pick(load(lesson).title, opts.lang) or following
    return [Next("n", say(opts, "app.ending.next", name=following, title=title), say(opts, "app.ending.next_short"),
                 Choice(following, "walk", opts.lang))]
