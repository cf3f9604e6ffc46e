"""The lesson picker `attnwalk serve` opens each browser tab on: the lessons in a list, the one under
the cursor described below it, and three ways into it, walk, walk predicting, or its quiz (keys or
buttons, for a mouse), in English or Chinese (l switches).

The lessons are handed in (serve/lessons.py reads them: this package reads no scenario files), and
the picker only ends with a Choice: the serve package runs the walk or the quiz it names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from rich.cells import cell_len
from rich.console import Group
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Button, OptionList, Static
from textual.widgets.option_list import Option

from attnwalk.app import collect_again
from attnwalk.app.footer import KeysFooter
from attnwalk.render.options import ViewOptions
from attnwalk.render.style import say
from attnwalk.render.wrap import Prose

ACTIVITIES = ("walk", "predict", "quiz")
LANGS = ("en", "zh")


@dataclass(frozen=True)
class LessonRow:
    key: str  # what the lesson is picked by: a built-in's name, a file's name
    title: str
    facts: str  # its size and mask, as `attnwalk list` shows them
    about: str  # its description
    problem: str = ""  # why it cannot be opened (a file that no longer loads), else ""
    own: bool = False  # from the teacher's folder, not a built-in
    start: bool = False  # the course's first lesson: marked "start here", the picker opens on it


@dataclass(frozen=True)
class Choice:
    key: str
    activity: str  # one of ACTIVITIES
    lang: str


class PickerApp(App[Choice | None]):
    """Ends with the Choice made, or None when the student leaves (q)."""

    CSS = """
    #title { height: auto; padding: 0 1; }
    #lessons { height: 1fr; min-height: 5; border: none; padding: 0 1; }
    #about { height: auto; max-height: 8; padding: 0 1; text-overflow: ellipsis; }
    #buttons { height: auto; padding: 0 1; }
    #buttons Button { margin-right: 2; }
    """
    ENABLE_COMMAND_PALETTE = False  # a student's page runs the lessons and nothing else
    BINDINGS = [
        Binding("w", "pick('walk')", "app.picker.key.walk"),
        Binding("p", "pick('predict')", "app.picker.key.predict"),
        Binding("t", "pick('quiz')", "app.picker.key.quiz"),
        Binding("l", "language", "app.picker.key.lang"),
        Binding("q", "leave", "app.picker.key.leave"),
    ]

    def __init__(self, listing: Callable[[str], list[LessonRow]], lang: str = "en",
                 selected: str | None = None) -> None:
        super().__init__()
        self.listing, self.selected = listing, selected
        self.opts = ViewOptions(lang=lang)
        self.rows: list[LessonRow] = []
        self._keys = {key: [b.description for b in found]
                      for key, found in self._bindings.key_to_bindings.items()}
        self._translate()

    def t(self, key: str, **values: object) -> str:
        return say(self.opts, key, **values)

    def _translate(self) -> None:
        """The footer's words in the picker's language (BINDINGS hold text keys), again after l."""
        bindings = self._bindings.key_to_bindings
        for key, found in bindings.items():
            bindings[key] = [replace(b, description=self.t(text_key)) if text_key.startswith("app.") else b
                             for b, text_key in zip(found, self._keys[key])]

    def compose(self) -> ComposeResult:
        yield Static(id="title")
        yield OptionList(id="lessons")
        yield Static(id="about")
        with Horizontal(id="buttons"):
            for activity in ACTIVITIES:
                yield Button("", id=activity, compact=True)
        yield KeysFooter()

    def on_mount(self) -> None:
        collect_again()  # off during the start (serve/activity.py, as cli.run)
        self.show()
        self.query_one(OptionList).focus()

    def show(self) -> None:
        """Everything in the picker's language: the list (the cursor kept on its lesson), the words."""
        keep = self.selected
        self.rows = self.listing(self.opts.lang)
        self.query_one("#title", Static).update(Text.assemble(
            (self.t("app.picker.title"), "bold"), "\n", (self.t("app.picker.hint"), "dim")))
        lessons = self.query_one(OptionList)
        lessons.clear_options()
        width = max((cell_len(row.key) for row in self.rows), default=0) + 2  # a key may be 注意力.yaml
        start = f"  {self.t('list.start')}"
        lessons.add_options([Option(Text.assemble((row.key + " " * (width - cell_len(row.key)), "bold"),
                                                  row.title, (start if row.start else "", "bold green")))
                             for row in self.rows])
        for activity in ACTIVITIES:
            self.query_one(f"#{activity}", Button).label = self.t(f"app.picker.button.{activity}")
        # on the lesson chosen before (after l, or back from a walk), else where the course starts
        index = next((i for i, row in enumerate(self.rows) if row.key == keep),
                     next((i for i, row in enumerate(self.rows) if row.start), 0))
        if self.rows:
            lessons.highlighted = index
        self._describe(index)
        self.refresh_bindings()

    def _describe(self, index: int | None) -> None:
        about = self.query_one("#about", Static)
        if index is None or not self.rows:
            about.update("")
            return
        row = self.rows[index]
        self.selected = row.key
        parts: list = [(row.title or row.key, "bold"), "\n", (row.facts, "dim")]
        if row.start:
            parts += [(f" · {self.t('list.start')}", "bold green")]
        if row.own:
            parts += [(f" · {self.t('app.picker.own', file=row.key)}", "dim")]
        if row.problem:
            parts += ["\n", (self.t("app.picker.problem", problem=row.problem), "red")]
        elif row.about:  # its first paragraph (YAML folds a blank line to one \n): the walk opens
            # with the whole of it, where its "what to notice" is not a spoiler for predicting
            parts += ["\n", row.about.split("\n")[0].strip()]
        # Prose: a Chinese description folds between characters, not only at its few spaces
        about.update(prose_line_of(Text.assemble(*parts)))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._describe(event.option_index)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.action_pick("walk")  # Enter on a lesson walks it

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_pick(event.button.id or "walk")

    def action_pick(self, activity: str) -> None:
        index = self.query_one(OptionList).highlighted
        if index is None or not self.rows or activity not in ACTIVITIES:
            return
        row = self.rows[index]
        if row.problem:
            self.notify(self.t("app.picker.problem", problem=row.problem), severity="error")
            return
        self.pick(Choice(row.key, activity, self.opts.lang))

    def pick(self, choice: Choice) -> None:
        """The picker's end with a choice (serve/activity.py passes it on before it ends)."""
        self.exit(choice)

    def action_language(self) -> None:
        self.opts = self.opts.with_(lang=LANGS[(LANGS.index(self.opts.lang) + 1) % len(LANGS)])
        self._translate()
        self.show()
        # the footer's words now, even while the page is not focused (Textual's Footer redraws
        # its keys only in a focused app, and a browser tab may report itself blurred)
        footer = self.query_one(KeysFooter)
        footer.call_later(footer.recompose)  # in the footer's own context, as Footer does it

    def action_leave(self) -> None:
        self.exit(None)


def prose_line_of(text: Text) -> Group:
    """`text` (its styles kept) as Prose in a Group: Textual wraps a bare Text itself, at spaces only."""
    prose = Prose(text.plain, style=text.style)
    prose.spans = list(text.spans)
    return Group(prose)
