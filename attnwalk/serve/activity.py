"""One activity of a browser session, in its own process (session.py starts each in turn): the
lesson picker, or one lesson's walk or quiz, run as the terminal runs them (app/walk.py with the
predictions of tutor/predict.py, app/quiz.py with the quiz's own loop, commands/quiz.run_quiz).

    python -m attnwalk.serve.activity --run picker|walk|predict|quiz [--lesson KEY] [--lessons DIR]
                                      [--lang en|zh] [--listing FILE]

Its arguments come from the session, never from the browser; a lesson is looked up by its key
among the lessons offered (lessons.py) and anything else is refused. Nothing is remembered:
a student's page has no progress file, and the teacher's own progress is never touched.
"""

from __future__ import annotations

import gc

if __name__ == "__main__":  # an activity's own process: as cli.run, the collector is off while the
    gc.disable()  # start's imports are made (not scanned again and again); each app turns it back
    # on once mounted (app.collect_again)

import argparse  # noqa: E402
import os
import sys
from pathlib import Path
from urllib.parse import quote

from attnwalk.app.picker import ACTIVITIES, LANGS, Choice, LessonRow, PickerApp
from attnwalk.layer.safe import escaped
from attnwalk.serve.lessons import SCHEME, Offered, load, read_listing, rows


def choice_url(choice: Choice) -> str:
    return f"{SCHEME}{choice.activity}?lesson={quote(choice.key, safe='')}&lang={choice.lang}"


class ServedPicker(PickerApp):
    def pick(self, choice: Choice) -> None:
        # Textual's one public way out of the app's own process before it ends: the session reads
        # the URL and never sends it on to the browser
        self.open_url(choice_url(choice), new_tab=False)
        super().pick(choice)


def listed(offered: Offered, listing: Path | None, lang: str) -> list[LessonRow]:
    """The picker's rows: from the server's listing file, else worked out here."""
    found = read_listing(listing, lang)
    return [LessonRow(**row) for row in (found if found is not None else rows(offered, lang))]


def run(activity: str, offered: Offered, lang: str, key: str | None, listing: Path | None = None) -> int:
    if activity == "picker":
        ServedPicker(lambda chosen: listed(offered, listing, chosen), lang, key).run()
        return 0
    lesson = offered.find(key or "")
    if lesson is None:
        print(f"attnwalk: no lesson {key!r} is offered", file=sys.stderr)
        return 2
    from attnwalk.layer.walk import compute
    from attnwalk.render.options import ViewOptions

    walk = compute(load(lesson))
    opts = ViewOptions(lang=lang, width=_columns())
    if activity in ("walk", "predict"):
        from attnwalk.serve.endings import ServedWalk

        ServedWalk(walk, opts, lesson.key, activity, offered).run()
        return 0
    from attnwalk.serve.endings import ServedQuiz

    quiz = ServedQuiz(walk, lesson.key, offered, opts)
    quiz.run()
    return quiz.return_code or 0


def _columns() -> int:
    try:
        return max(int(os.environ.get("COLUMNS", "80")), 20)
    except ValueError:
        return 80


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnwalk.serve.activity")
    parser.add_argument("--run", choices=("picker", *ACTIVITIES), required=True)
    parser.add_argument("--lesson")
    parser.add_argument("--lessons", type=Path)
    parser.add_argument("--lang", choices=LANGS, default="en")
    parser.add_argument("--listing", type=Path)
    args = parser.parse_args(argv)
    return run(args.run, Offered(args.lessons), args.lang, args.lesson, args.listing)


if __name__ == "__main__":
    sys.exit(main())
