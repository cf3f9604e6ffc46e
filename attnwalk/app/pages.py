"""A Textual pager over a sequence of whole screens, each one Rich renderable: `attnwalk decode`'s
steps. The same alternate screen, footer, help, prompt line and exit codes as the walk (walk.py),
without its matrix cursor: a decode step is several small tables, not one matrix."""

from __future__ import annotations

from typing import Protocol

from rich.console import RenderableType
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Footer, Input, Label, Static

from attnwalk.app import collect_again
from attnwalk.app.help import HelpScreen, translated
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


class PagesApp(App[int]):
    """Step through `pages` from the first; the return code is 0 on q or at the end, 130 on Ctrl-C."""

    CSS = """
    Screen { layout: vertical; }
    #page { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
    #message { height: auto; padding: 0 1; color: $text-warning; display: none; }
    #message.-shown { display: block; }
    #prompt { height: auto; display: none; padding: 0 1; }
    #prompt.-shown { display: block; }
    #prompt Input { border: none; height: 1; padding: 0; width: 1fr; }
    """
    ENABLE_COMMAND_PALETTE = False
    AUTO_FOCUS = None  # the keys are the app's; the prompt's line takes focus only while shown
    BINDINGS = [
        Binding("n,enter,space,right", "next", "app.key.next", key_display="n"),
        Binding("b,left", "back", "app.key.back", key_display="b"),
        Binding("g", "jump", "app.key.jump"),
        Binding("m", "mode", "app.key.mode"),
        Binding("question_mark", "help", "app.key.help", key_display="?"),
        Binding("q", "quit_pages", "app.key.quit"),
        Binding("ctrl+d", "quit_pages", show=False),
        Binding("j,down", "scroll_page(1)", show=False),
        Binding("k,up", "scroll_page(-1)", show=False),
        Binding("d,pagedown", "page(1)", show=False),
        Binding("u,pageup", "page(-1)", show=False),
        Binding("ctrl+c", "interrupt", show=False, priority=True),
    ]

    def __init__(self, pages: Pages, opts: ViewOptions) -> None:
        super().__init__()
        translated(self, opts)
        self.pages, self.opts = pages, opts
        self.index = 0
        self.ended = False  # n on the last screen
        self.message = ""
        self._drawn_at = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="page", can_focus=False):  # the app's keys scroll it
            yield Static(id="body")
        yield Static(id="message")
        with Vertical(id="prompt"):
            yield Label(id="prompt-label")
            yield Input(id="prompt-input")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        collect_again()  # off during the start: cli.run
        self.show()

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
        self._show_message()

    def _show_message(self) -> None:
        shown = self.query_one("#message", Static)
        shown.update(self.message)
        shown.set_class(bool(self.message), "-shown")

    def say_now(self, message: str) -> None:
        self.message = message
        self._show_message()

    async def run_action(self, action, default_namespace=None) -> bool:
        """A message stays until the next key that is not a scroll."""
        if self.message and not action.startswith(("scroll", "page")):
            self.message = ""
            self._show_message()
        return await super().run_action(action, default_namespace)

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

    def action_scroll_page(self, lines: int) -> None:
        self.query_one("#page").scroll_relative(y=lines, animate=False)

    def action_page(self, pages: int) -> None:
        page = self.query_one("#page")
        page.scroll_relative(y=pages * max(page.size.height - 1, 1), animate=False)

    def action_mode(self) -> None:
        self.message = self.pages.next_mode()
        self.show(home=False)

    def action_jump(self) -> None:
        count = self.pages.count
        field = self.query_one("#prompt-input", Input)
        self.query_one("#prompt-label", Label).update(self.t(self.pages.jump_key, count=count))
        field.value = ""
        self.query_one("#prompt").add_class("-shown")
        field.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._close_prompt()
        answer = event.value.strip()
        if not answer:
            return
        if answer.isdecimal() and 1 <= int(answer) <= self.pages.count:
            self.go(int(answer) - 1)
        else:
            self.say_now(self.t(self.pages.no_such_key, value=answer, count=self.pages.count))

    def _close_prompt(self) -> None:
        self.query_one("#prompt").remove_class("-shown")
        self.set_focus(None)

    def on_key(self, event) -> None:
        if event.key == "escape" and self.query_one("#prompt").has_class("-shown"):
            event.stop()
            self._close_prompt()

    def action_help(self) -> None:
        def closed(quit_now: bool | None) -> None:
            if quit_now:
                self.exit(0)

        self.push_screen(HelpScreen(self.opts, self.pages.help_key), closed)

    def action_quit_pages(self) -> None:
        self.exit(0)

    def action_interrupt(self) -> None:
        self.exit(130, return_code=130)
