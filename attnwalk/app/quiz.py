"""The interactive quiz as a Textual app: the questions, verdicts and worked cells scroll in a log,
the answer is typed in a line below it. After an answer the log shows from that answer down, so
the verdict stays in view however long the worked cell after it; PgUp/PgDn (and ↑/↓) scroll.
Meanwhile the question being asked is kept above the answer line whenever the log's view does not
reach it (the next question after a long worked cell): the learner never answers a question out
of view.

The quiz's own loop (commands/quiz.run_quiz: ask, diagnose, retry, score) runs unchanged in a
worker thread, given a console that writes to the log and an answer source that waits for the
line typed; so the quiz asks, judges and scores exactly as it does on piped lines.
"""

from __future__ import annotations

import queue
from collections.abc import Callable

from rich.console import RenderableType
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Input, Label, RichLog, Static

from attnwalk.app import collect_again
from attnwalk.app.footer import KeysFooter
from attnwalk.app.help import translated
from attnwalk.app.scrolling import PaneScroll
from attnwalk.render.options import ViewOptions
from attnwalk.render.style import say

_INTERRUPT = object()  # Ctrl-C, handed to the quiz's thread as the answer it waits for


class LogConsole:
    """What the quiz prints on (console.print and console.width): the app's log."""

    def __init__(self, app: "QuizApp") -> None:
        self.app = app

    @property
    def width(self) -> int:
        return max(self.app.query_one(RichLog).size.width - 4, 40)  # less its padding and scrollbar

    def print(self, *objects, **_) -> None:
        self.app.call_from_thread(self.app.write, objects[0] if objects else Text(""))


class TypedAnswers:
    """Answers typed in the app's input line; the quiz's thread waits for each one."""

    interactive = True  # a mistyped answer is asked again, as at a terminal

    def __init__(self, app: "QuizApp") -> None:
        self.app = app
        self.typed: queue.Queue = queue.Queue()

    def ask(self, prompt: str, question: RenderableType | None = None) -> str | None:
        self.app.call_from_thread(self.app.ask, prompt, question)
        answer = self.typed.get()
        if answer is _INTERRUPT:
            raise KeyboardInterrupt
        return answer


class QuizApp(PaneScroll, App[int]):
    """Runs `quiz(console, answers)` (returning a QuizResult) and keeps its result in `result`."""

    CSS = """
    RichLog { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
    #question { height: auto; max-height: 60%; padding: 0 1; border-top: solid $secondary; display: none; }
    #prompt { height: auto; padding: 0 1; }
    #prompt Label { width: auto; }
    #prompt Input { border: none; height: 1; padding: 0; width: 1fr; }
    """
    ENABLE_COMMAND_PALETTE = False
    scrolled = "RichLog"  # PgUp/PgDn, ↑/↓: PaneScroll
    BINDINGS = [
        Binding("escape", "stop", "app.key.stop"),
        # priority: the one-line Input binds these keys too (to scroll itself), and they are the log's
        Binding("pagedown", "scroll_pages(1)", "app.key.scroll", key_display="PgUp/PgDn", priority=True),
        Binding("pageup", "scroll_pages(-1)", show=False, priority=True),
        Binding("down", "scroll_lines(1)", show=False, priority=True),
        Binding("up", "scroll_lines(-1)", show=False, priority=True),
        Binding("ctrl+c", "interrupt", show=False, priority=True),
    ]

    def __init__(self, quiz: Callable, opts: ViewOptions, intro: list[RenderableType]) -> None:
        super().__init__()
        translated(self, opts)
        self.quiz, self.opts, self.intro = quiz, opts, intro
        self.answers = TypedAnswers(self)
        self.result = None
        self.waiting = False

    def compose(self) -> ComposeResult:
        # min_width: RichLog renders at least 78 cells by default, wider than its own content at 80
        # columns (padding and scrollbar), which cut the right edge off every panel
        yield RichLog(wrap=True, markup=False, auto_scroll=False, min_width=20)  # scrolled by write
        yield Static(id="question")  # the question asked, where the log's view does not reach it
        with Horizontal(id="prompt"):
            yield Label(id="prompt-label")
            yield Input(id="answer")
        yield KeysFooter()

    def on_mount(self) -> None:
        collect_again()  # off during the start: cli.run
        self.query_one(RichLog).can_focus = False  # a click on the log must not take the answer line's keys
        for line in self.intro:
            self.write(line)
        self.query_one(Input).focus()
        self.watch(self.query_one(RichLog), "scroll_y", self._pin_question, init=False)
        self.run_worker(self._run, thread=True)

    def _run(self) -> None:
        result = self.quiz(LogConsole(self), self.answers)
        self.call_from_thread(self.finished, result)

    _anchor: int | None = None  # the log line of the last answer: the view starts no lower

    def write(self, renderable) -> None:
        log = self.query_one(RichLog)
        log.write(renderable)
        self.call_after_refresh(self._follow)

    def _follow(self) -> None:
        """To the end of the log, but never past the learner's last answer: what comes after it
        (verdict, worked cell, next question) shows from its top; PgDn reads on."""
        log = self.query_one(RichLog)
        y = log.max_scroll_y if self._anchor is None else min(self._anchor, log.max_scroll_y)
        log.scroll_to(y=y, animate=False)

    _question: RenderableType | None = None  # the question being answered

    def _pin_question(self) -> None:
        """Keep the question above the answer line while the log's view stops short of the log's
        end, where the question was printed last; hide it once the view reaches it. (Shown, the
        pin makes the log shorter, so the view stays short of the end: no flicker.)"""
        log, pinned = self.query_one(RichLog), self.query_one("#question", Static)
        shown = self.waiting and self._question is not None and log.scroll_y < log.max_scroll_y
        if shown != pinned.display:
            pinned.update(self._question if shown else "")
            pinned.display = shown

    def ask(self, prompt: str, question: RenderableType | None = None) -> None:
        self.waiting = True
        self._question = question
        self.call_after_refresh(self._pin_question)
        self.query_one("#prompt-label", Label).update(Text(prompt, style="bold"))
        field = self.query_one(Input)
        field.value = ""
        field.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if not self.waiting:
            self.exit(0)  # the quiz is over: Enter closes it
            return
        self.waiting = False
        self._pin_question()
        self._anchor = len(self.query_one(RichLog).lines)
        self.write(Text(f"> {event.value}", style="dim"))
        self.answers.typed.put(event.value)

    def finished(self, result) -> None:
        self.result = result
        if result.interrupted:
            self.exit(130, return_code=130)
        elif result.answered < result.questions:  # stopped with q or Esc: closed at once
            self.exit(0)
        else:  # every question answered: the last verdict stays in view until Enter
            self.query_one("#prompt-label", Label).update(Text(say(self.opts, "app.quiz_done"), style="bold"))

    def action_stop(self) -> None:
        """Esc: stop here, as the end of input does; the score so far is kept."""
        if self.waiting:
            self.waiting = False
            self.answers.typed.put(None)
        elif self.result is not None:
            self.exit(0)

    def action_interrupt(self) -> None:
        if self.waiting:
            self.waiting = False
            self.answers.typed.put(_INTERRUPT)  # the quiz stops, counts what was answered, then exits 130
        else:
            self.exit(130, return_code=130)
