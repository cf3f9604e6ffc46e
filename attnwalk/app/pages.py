"""A Textual pager over a sequence of whole screens, each one Rich renderable: `attnwalk decode`'s
steps. The same alternate screen, footer, help, prompt line and exit codes as the walk (walk.py),
without its matrix cursor: a decode step is several small tables, not one matrix."""

from __future__ import annotations

from typing import Protocol

from rich.console import RenderableType
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from attnwalk.app import collect_again
from attnwalk.app.footer import KeysFooter
from attnwalk.app.help import MessageAndExits, translated
from attnwalk.app.scrolling import PaneScroll
from attnwalk.app.typed import PROMPT_CSS, PromptLine
from attnwalk.render.options import ViewOptions
from attnwalk.render.style import say


class Pages(Protocol):
    """What the pager shows: `count` screens, each opening with its own header (where it is, the
    mode); `next_mode` recomputes them in the next mode and says so (the pager stays on the same
    screen)."""

    help_key: str  # the text key of the help's body
    jump_key: str  # the prompt of g: "Jump to step (1–{count}): "
    no_such_key: str  # g's answer out of range: "{value}", "{count}"

    @property
    def count(self) -> int: ...

    def screen(self, index: int, opts: ViewOptions) -> RenderableType: ...

    def next_mode(self) -> str: ...


class PagesApp(PromptLine, PaneScroll, MessageAndExits, App[int]):
    """Step through `pages` from the first; the return code is 0 on q or at the end, 130 on Ctrl-C."""

    CSS = """
    Screen { layout: vertical; }
    #page { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
    #message { height: auto; padding: 0 1; color: $text-warning; display: none; }
    #message.-shown { display: block; }
    """ + PROMPT_CSS
    ENABLE_COMMAND_PALETTE = False
    scrolled = "#page"  # j/k, d/u: PaneScroll
    AUTO_FOCUS = None  # the keys are the app's; the prompt's line takes focus only while shown
    BINDINGS = [
        Binding("n,enter,space,right", "next", "app.key.next", key_display="n"),
        Binding("b,left", "back", "app.key.back", key_display="b"),
        Binding("g", "jump", "app.key.jump"),
        Binding("m", "mode", "app.key.mode"),
        # a step is often taller than the screen: the footer says how to read on (↓ a line, d a page)
        Binding("j,down", "scroll_lines(1)", "app.key.scroll", key_display="↓ d"),
        Binding("question_mark", "help", "app.key.help", key_display="?"),
        Binding("q", "leave", "app.key.quit"),
        Binding("ctrl+d", "leave", show=False),
        Binding("k,up", "scroll_lines(-1)", show=False),
        Binding("d,pagedown", "scroll_pages(1)", show=False),
        Binding("u,pageup", "scroll_pages(-1)", show=False),
        Binding("ctrl+c", "interrupt", show=False, priority=True),
    ]

    def __init__(self, pages: Pages, opts: ViewOptions) -> None:
        super().__init__()
        translated(self, opts)
        self.pages, self.opts = pages, opts
        self.help_key = pages.help_key
        self.index = 0
        self.ended = False  # n on the last screen
        self.message = ""
        self._drawn_at = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="page", can_focus=False):  # the app's keys scroll it
            yield Static(id="body")
        yield Static(id="message")
        yield KeysFooter()

    def on_mount(self) -> None:
        collect_again()  # off during the start: cli.run
        self.show()
        self.call_after_refresh(self.add_prompt)  # g's line, after the first frame

    def on_resize(self) -> None:
        self.call_after_refresh(self._resized)

    def _resized(self) -> None:
        if self.size != self._drawn_at:  # tables are laid out for a width: draw them again
            self.show(home=False)

    # -- what is shown -------------------------------------------------------------------------

    def t(self, key: str, **values: object) -> str:
        return say(self.opts, key, **values)

    def show(self, home: bool = True) -> None:
        self._drawn_at = self.size
        opts = self.opts.with_(width=max(self.size.width - 3, 20))  # less padding and scrollbar
        self.query_one("#body", Static).update(self.pages.screen(self.index, opts))
        if home:
            self.query_one("#page").scroll_home(animate=False)
        self.show_message()

    # -- keys ----------------------------------------------------------------------------------

    def go(self, index: int) -> None:
        self.index = index
        self.show()

    def action_next(self) -> None:
        if self.index == self.pages.count - 1:
            self.ended = True
            self.exit(0)
        else:
            self.go(self.index + 1)

    def action_back(self) -> None:
        if self.index == 0:
            self.say_now(self.t("decode.first_step"))
        else:
            self.go(self.index - 1)

    def action_mode(self) -> None:
        self.message = self.pages.next_mode()
        self.show(home=False)

    def action_jump(self) -> None:
        count = self.pages.count
        prompt = self.t(self.pages.jump_key, count=count)

        def jumped(answer: str | None) -> None:
            answer = (answer or "").strip()
            if not answer:
                return
            if answer.isdecimal() and 1 <= int(answer) <= count:
                self.go(int(answer) - 1)
            else:  # as the walk's g: say why and ask again, Esc leaves the line
                self.say_now(self.t(self.pages.no_such_key, value=answer, count=count))
                self.ask(prompt, jumped)

        self.ask(prompt, jumped)
