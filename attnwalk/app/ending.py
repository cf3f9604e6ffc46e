"""The page a lesson ends on in a browser (`attnwalk serve`): what the walk or the quiz came to
(the predictions summed up, the quiz's score and the mistakes its wrong answers showed), then
what to do next as choices, keys or buttons: a student in a browser cannot type the commands
the terminal's ending prints ("Then run savings_bank").

The choices are handed in, each a key, its words and a value; the screen is dismissed with the
value picked, or None for "back to the lessons" (q). The serve package turns the value into the
next activity.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Group
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Static

from attnwalk.app import collect_again
from attnwalk.app.footer import KeysFooter
from attnwalk.render.options import ViewOptions
from attnwalk.render.style import say
from attnwalk.render.wrap import Prose


@dataclass(frozen=True)
class Next:
    key: str  # the letter that picks it
    words: str  # what it does, in the page's language (its button)
    short: str  # the same in a word or two (the footer)
    value: object  # what the app ends with


class EndingScreen(Screen[object]):
    """`title`, then `lines` (each a paragraph), then `choices`; dismissed with the value chosen,
    or None for q, back to the lessons. Pushed by the app that ends (serve/activity.py): a
    browser's session is one app per activity, so the end page is a screen of that app."""

    CSS = """
    #said { height: auto; max-height: 1fr; padding: 1 2; }
    #choices { height: auto; padding: 0 2 1 2; }
    #choices Button { width: auto; max-width: 100%; text-align: left; }
    """
    AUTO_FOCUS = None  # the keys are the screen's, not a button's

    def __init__(self, title: str, lines: list[str], choices: list[Next], opts: ViewOptions) -> None:
        super().__init__()
        self.title_text, self.lines, self.choices, self.opts = title, lines, choices, opts
        for n, choice in enumerate(choices):
            self._bindings.bind(choice.key, f"choose({n})", choice.short)
        self._bindings.bind("q", "back", say(opts, "app.ending.back_key"))

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="said"):
            yield Static(Group(Prose(self.title_text, style="bold"), Text(""),
                               *[Prose(line) for line in self.lines]))
        with Vertical(id="choices"):  # one a line: a choice says what it is in words
            for n, choice in enumerate(self.choices):
                yield Button(f"{choice.key}  {choice.words}", id=f"choice-{n}", compact=True)
            yield Button(f"q  {say(self.opts, 'app.ending.back')}", id="back", compact=True)
        yield KeysFooter()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        name = event.button.id or ""
        if name.startswith("choice-"):
            self.action_choose(int(name.removeprefix("choice-")))
        else:
            self.action_back()

    def action_choose(self, n: int) -> None:
        self.dismiss(self.choices[n].value)

    def action_back(self) -> None:
        self.dismiss(None)


class EndsOnAPage:
    """A mixin for the app that pushes an EndingScreen: while it shows, the app's own keys (n, g,
    m, the walk's; the quiz's Esc) neither act on the screen below it nor show in its footer."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if isinstance(self.screen, EndingScreen):
            return action == "interrupt"  # Ctrl-C still ends it; the page's own keys are the screen's
        return super().check_action(action, parameters)


class EndingApp(App[object]):
    """An EndingScreen on its own: the app ends with the value chosen (None: back)."""

    ENABLE_COMMAND_PALETTE = False

    def __init__(self, title: str, lines: list[str], choices: list[Next], opts: ViewOptions) -> None:
        super().__init__()
        self.page = EndingScreen(title, lines, choices, opts)

    def on_mount(self) -> None:
        collect_again()
        self.push_screen(self.page, self.exit)
